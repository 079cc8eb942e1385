package auth

import (
	"errors"
	"net"

	"strand/core/config"
)

// gssapiMechanism is SASL/GSSAPI with Kerberos V5 (RFC 4752).
type gssapiMechanism struct {
	login *kerberosLogin
	rules config.KerberosRules
}

func newGSSAPI(login *kerberosLogin, rules config.KerberosRules) Mechanism {
	return gssapiMechanism{login: login, rules: rules}
}

func (gssapiMechanism) Name() string { return "GSSAPI" }

func (m gssapiMechanism) Start(remote net.Addr) Exchange { return &gssapiExchange{} }

type gssapiExchange struct{}

func (e *gssapiExchange) Next([]byte) ([]byte, bool, error) {
	return nil, false, invalidCredentials("GSSAPI", errors.New("GSSAPI is not implemented yet"))
}

func (e *gssapiExchange) Result() Result { return Result{} }

type gssapiClient struct {
	login   *kerberosLogin
	service string
}

func (gssapiClient) Name() string { return "GSSAPI" }

func (c gssapiClient) Start(string) (ClientExchange, []byte, error) {
	return nil, nil, errors.New("GSSAPI client is not implemented yet")
}
