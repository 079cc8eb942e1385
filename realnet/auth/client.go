package auth

import (
	"errors"
	"fmt"

	"strand/core/config"
	"strand/core/metadata"
)

// ClientMechanism is the client side of a SASL mechanism: what a node
// authenticates with on its connections to other nodes (inter-broker and
// controller traffic), with the listener's own credentials.
type ClientMechanism interface {
	// Name is the mechanism's SASL name.
	Name() string
	// Start begins an exchange with the node at host (the host name or
	// address the node dials) and returns the first token to send.
	Start(host string) (ClientExchange, []byte, error)
}

// ClientExchange is one client-side exchange.
type ClientExchange interface {
	// Next takes the server's answer to the last token sent and returns
	// the next token. done with a token: send it, and its answer ends the
	// exchange; done without one: the exchange is over.
	Next(answer []byte) (token []byte, done bool, err error)
}

// ClientMechanism returns the mechanism a node connects to this listener
// with, using the listener's JAAS credentials.
func (l *Listener) ClientMechanism(name string) (ClientMechanism, error) {
	if l.sasl == nil {
		return nil, fmt.Errorf("listener %s has no SASL", l.name)
	}
	switch name {
	case config.MechanismPlain:
		if l.sasl.Plain == nil || l.sasl.Plain.Username == "" {
			return nil, fmt.Errorf("listener %s: no PLAIN username for connecting nodes", l.name)
		}
		return plainClient{user: l.sasl.Plain.Username, password: l.sasl.Plain.Password}, nil
	case config.MechanismGSSAPI:
		if l.kerberos == nil {
			return nil, fmt.Errorf("listener %s: no Kerberos login for connecting nodes", l.name)
		}
		return gssapiClient{login: l.kerberos, service: l.sasl.Kerberos.ServiceName}, nil
	case config.MechanismScramSHA256, config.MechanismScramSHA512:
		s := l.sasl.Scram[name]
		if s == nil || s.Username == "" {
			return nil, fmt.Errorf("listener %s: no %s username for connecting nodes", l.name, name)
		}
		m, _ := metadata.ScramMechanismNamed(name)
		return scramClient{mechanism: m, user: s.Username, password: s.Password}, nil
	}
	return nil, fmt.Errorf("listener %s: SASL mechanism %s has no client", l.name, name)
}

// plainClient sends the username and password once.
type plainClient struct{ user, password string }

func (plainClient) Name() string { return config.MechanismPlain }

func (c plainClient) Start(string) (ClientExchange, []byte, error) {
	return &plainClientExchange{}, AppendPlainMessage(nil, c.user, c.password), nil
}

type plainClientExchange struct{ answered bool }

func (e *plainClientExchange) Next([]byte) ([]byte, bool, error) {
	if e.answered {
		return nil, false, errors.New("PLAIN: a second answer from the server")
	}
	e.answered = true
	return nil, true, nil
}
