package realnet

import "strand/core/config"

// servedSecurityProtocols are the listener security protocols realnet
// serves (SPEC.md §10): all of Kafka's, with TLS and SASL run by
// realnet/auth (authconn.go). Start refuses a configuration with a
// listener on any other (config.Broker.CheckProtocolsServed).
var servedSecurityProtocols = config.SecurityProtocols()
