package realnet

import "strand/core/config"

// servedSecurityProtocols are the listener security protocols realnet
// serves (SPEC.md §10). Start refuses a configuration with a listener on
// any other (config.Broker.CheckProtocolsServed): serving a listener the
// operator mapped to SSL or SASL in plaintext would open the port the
// operator meant to secure. TLS and SASL join this list as realnet
// implements their handshakes; until then every connection is
// User:ANONYMOUS (env.AnonymousPrincipal).
var servedSecurityProtocols = []string{config.SecurityProtocolPlaintext}
