package broker

// ApiVersions (key 18), versions 0..4.
//
// Served: the table of the listener the request arrived on (api_table.go:
// a broker listener lists the client APIs, a controller listener the
// control plane's, as Kafka answers per listener); KIP-511: a version above
// 4 gets a v0 body with UNSUPPORTED_VERSION and that table (node.go,
// HandleRequest), so the client retries with v4.
// ClientSoftwareName/Version (v3) are accepted and not validated.
//
// Skipped: finalized features (KIP-584) and throttling.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
)

func (n *Node) handleAPIVersions(conn env.ConnID, hdr env.RequestHeader, req *kmsg.ApiVersionsRequest) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	kind, _ := n.listenerKind(hdr.Listener) // HandleRequest has checked it
	resp.ApiKeys = append(resp.ApiKeys, n.advertised[kind]...)
	n.net.Reply(conn, hdr.CorrelationID, resp)
}
