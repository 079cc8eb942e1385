package simnet

import (
	"fmt"

	"strand/core/env"
)

// ReplyFrame answers (conn, correlationID) with a frame the core encoded
// itself (Fetch). Its file regions are read from the simulated disk into
// the frame at once — the simulator's stand-in for sendfile, and the one
// copy of their bytes — and the frame is released, so the frame that
// travels is the same bytes realnet sends. A region that cannot be read
// (a disk fault) breaks the connection, as a failed sendfile does in
// realnet.
func (nn *NodeNet) ReplyFrame(conn env.ConnID, correlationID int32, frame env.Frame) {
	if frame.Release != nil {
		defer frame.Release()
	}
	c := nn.host.inbound[conn]
	if c == nil {
		return
	}
	bytes, err := frame.AppendTo(make([]byte, 0, frame.Len()))
	if err != nil {
		c.breakConn(fmt.Sprintf("node %d cannot read a Fetch region for correlation id %d: %v", nn.host.nodeID, correlationID, err))
		return
	}
	c.reply(correlationID, bytes)
}
