package admission

// Plane is the class of traffic a connection carries, which decides the
// budget its requests are read under and its share of the node's event
// loop.
type Plane uint8

const (
	// PlaneClient is every client's traffic.
	PlaneClient Plane = iota
	// PlaneControl is the node's own: connections on a controller
	// listener (Raft, broker registration and heartbeats, forwarded admin
	// requests), and replication connections, which a follower's Fetch
	// (replica id ≥ 0) marks on a listener shared with clients.
	PlaneControl
	// Planes is the number of planes.
	Planes
)

func (p Plane) String() string {
	switch p {
	case PlaneClient:
		return "client"
	case PlaneControl:
		return "control"
	}
	return "unknown plane"
}
