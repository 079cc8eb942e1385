package simnet

import "strings"

// IP is the client host's address as ACLs name it: the IP the nodes see in
// RequestHeader.ClientHost, without Kafka's leading "/".
func (c *Client) IP() string { return strings.TrimPrefix(c.host.address(), "/") }
