package simnet

import (
	"fmt"
	"math/rand/v2"

	"strand/sim/sched"
)

// Block stops frames from one host to another (one direction) until
// Unblock or Heal. Frames due meanwhile wait and are retransmitted; see the
// package comment.
func (n *Network) Block(from, to HostID) {
	n.checkHost(from)
	n.checkHost(to)
	n.link(from, to).blocked = true
	n.s.Trace(sched.Record{Kind: "net.block", Node: -1, A: int64(from), B: int64(to)})
}

// Unblock lets frames from one host to another through again.
func (n *Network) Unblock(from, to HostID) {
	n.checkHost(from)
	n.checkHost(to)
	n.link(from, to).blocked = false
	n.s.Trace(sched.Record{Kind: "net.unblock", Node: -1, A: int64(from), B: int64(to)})
}

// Partition blocks every link from a host in sideA to a host in sideB, and,
// if symmetric, every link back.
func (n *Network) Partition(sideA, sideB []HostID, symmetric bool) {
	for _, a := range sideA {
		for _, b := range sideB {
			n.Block(a, b)
			if symmetric {
				n.Block(b, a)
			}
		}
	}
}

// Isolate cuts host h off from every other host, both ways.
func (n *Network) Isolate(h HostID) {
	for _, other := range n.hosts {
		if other.id != h {
			n.Block(h, other.id)
			n.Block(other.id, h)
		}
	}
}

// Clog adds delayNs of latency to every frame sent from one host to another
// during the next durationNs: a congested link rather than a cut one.
func (n *Network) Clog(from, to HostID, durationNs, delayNs int64) {
	n.checkHost(from)
	n.checkHost(to)
	if durationNs < 0 || delayNs < 0 {
		panic(fmt.Sprintf("simnet: clog for %dns adding %dns", durationNs, delayNs))
	}
	l := n.link(from, to)
	l.clogUntilNs = n.s.NowNs() + durationNs
	l.clogDelayNs = delayNs
	n.s.Trace(sched.Record{Kind: "net.clog", Node: -1, A: int64(from), B: int64(to), C: delayNs})
}

// Heal removes every network fault, for the liveness phase: partitions and
// clogs end, chaos stops, frames stop breaking connections or taking the
// long tail, and black-holed connections break so both ends learn of them
// (as a keepalive eventually would). Base latency and jitter stay.
func (n *Network) Heal() {
	if n.chaos != nil {
		n.chaos.tick.Cancel()
		n.chaos = nil
	}
	for i := range n.links {
		n.links[i] = link{}
	}
	n.faults.BreakOneIn = 0
	n.faults.TailPerMille = 0
	n.faults.BlackholePerMille = 0
	n.faults.PartitionPerMille = 0
	n.faults.ClogPerMille = 0
	var blackholed []*conn
	for _, c := range n.conns {
		if c.toServer.blackholed || c.toClient.blackholed {
			blackholed = append(blackholed, c)
		}
	}
	for _, c := range blackholed {
		c.breakConn("heal")
	}
	n.s.Trace(sched.Record{Kind: "net.heal", Node: -1, A: int64(len(blackholed))})
}

func (n *Network) checkHost(h HostID) {
	if h < 0 || int(h) >= len(n.hosts) {
		panic(fmt.Sprintf("simnet: host %d does not exist (%d hosts)", h, len(n.hosts)))
	}
}

// chaos drives the partitions and clogs of Faults on a tick.
type chaos struct {
	n    *Network
	tick sched.Handle
	// primary is the partition drawn from the network's stream, as it
	// always was; extra are the partitions drawn beside it from kinds
	// (Faults.PartitionsMax), each ending on its own.
	primary *chaosPartition
	extra   []*chaosPartition
	// kinds draws what is not the primary partition's own: whether it is
	// a bridge, and the extra partitions; nil when neither is drawn.
	kinds *rand.Rand
}

// chaosPartition is one partition chaos made: the links it cuts, until
// endNs.
type chaosPartition struct {
	endNs int64
	links [][2]HostID
}

// StartChaos starts partitioning and clogging links at random, at the rates
// of the network's Faults, until Heal. Partitions it makes and ends cover
// only their own links, so they may overlap each other and Block calls.
// kinds is the stream the bridge and concurrent partitions draw from
// (Faults.BridgePerMille, Faults.PartitionsMax), so that they reshuffle
// none of the network's other draws; nil is allowed when neither is on.
func (n *Network) StartChaos(kinds *rand.Rand) {
	if n.chaos != nil {
		panic("simnet: chaos started twice")
	}
	if (n.faults.BridgePerMille > 0 || n.faults.PartitionsMax > 1) && kinds == nil {
		panic("simnet: bridge or concurrent partitions need their own stream")
	}
	if n.faults.PartitionPerMille == 0 && n.faults.ClogPerMille == 0 {
		return
	}
	n.chaos = &chaos{n: n, kinds: kinds}
	n.chaos.tick = n.s.After(n.faults.ChaosTickNs, n.chaos.step)
}

// ActivePartitions is how many chaos partitions cut the network now.
func (n *Network) ActivePartitions() int {
	if n.chaos == nil {
		return 0
	}
	active := len(n.chaos.extra)
	if n.chaos.primary != nil {
		active++
	}
	return active
}

func (ch *chaos) step() {
	n := ch.n
	f := &n.faults
	nowNs := n.s.NowNs()
	if ch.primary != nil && nowNs >= ch.primary.endNs {
		ch.end(ch.primary, false)
		ch.primary = nil
	} else if ch.primary == nil && sched.Chance(n.r, f.PartitionPerMille) {
		ch.primary = ch.partition(n.r)
	}
	ch.stepExtra(nowNs)
	n.stats.PartitionsConcurrentMax = max(n.stats.PartitionsConcurrentMax, n.ActivePartitions())
	if len(n.hosts) >= 2 && sched.Chance(n.r, f.ClogPerMille) {
		from := HostID(n.r.IntN(len(n.hosts)))
		to := HostID(n.r.IntN(len(n.hosts) - 1))
		if to >= from {
			to++
		}
		n.Clog(from, to, sched.Int64Between(n.r, 1, f.ClogNsMax), sched.Int64Between(n.r, 0, f.ClogDelayNsMax))
	}
	ch.tick = n.s.After(f.ChaosTickNs, ch.step)
}

// stepExtra ends the extra partitions due, and while one is in force
// starts another beside it, up to Faults.PartitionsMax at once.
func (ch *chaos) stepExtra(nowNs int64) {
	if ch.n.faults.PartitionsMax <= 1 {
		return
	}
	kept := ch.extra[:0]
	for _, p := range ch.extra {
		if nowNs >= p.endNs {
			ch.end(p, true)
			continue
		}
		kept = append(kept, p)
	}
	clear(ch.extra[len(kept):])
	ch.extra = kept
	if ch.primary != nil && 1+len(ch.extra) < ch.n.faults.PartitionsMax &&
		sched.Chance(ch.kinds, ch.n.faults.PartitionPerMille) {
		if p := ch.partition(ch.kinds); p != nil {
			ch.extra = append(ch.extra, p)
		}
	}
}

// end lifts p's cuts; extra says it was drawn beside the primary.
func (ch *chaos) end(p *chaosPartition, extra bool) {
	n := ch.n
	for _, l := range p.links {
		n.link(l[0], l[1]).chaosBlocks--
	}
	r := sched.Record{Kind: "net.partition_end", Node: -1}
	if extra {
		r.A = 1
	}
	n.s.Trace(r)
}

// partition starts a partition, drawing its shape from r: one node
// isolated, or the hosts split in two sides that each hold a node; one way
// only if asymmetric. A split may then become a bridge (Faults.
// BridgePerMille, drawn from kinds): one node of a side, the bridge, keeps
// its links to both sides while the sides cannot reach each other, a
// non-transitive network. It returns nil when there are fewer than two
// nodes.
func (ch *chaos) partition(r *rand.Rand) *chaosPartition {
	n := ch.n
	f := &n.faults
	var nodes []HostID
	for _, h := range n.hosts {
		if h.isNode {
			nodes = append(nodes, h.id)
		}
	}
	if len(nodes) < 2 {
		return nil
	}
	symmetric := !sched.Chance(r, f.AsymmetricPerMille)
	var sideA, sideB []HostID
	isolate := sched.Chance(r, f.IsolatePerMille)
	if isolate {
		isolated := nodes[r.IntN(len(nodes))]
		sideA = []HostID{isolated}
		for _, h := range n.hosts {
			if h.id != isolated {
				sideB = append(sideB, h.id)
			}
		}
	} else {
		// Two distinct nodes anchor the sides; every other host picks one.
		i := r.IntN(len(nodes))
		j := r.IntN(len(nodes) - 1)
		if j >= i {
			j++
		}
		for _, h := range n.hosts {
			switch {
			case h.id == nodes[i]:
				sideA = append(sideA, h.id)
			case h.id == nodes[j]:
				sideB = append(sideB, h.id)
			case r.IntN(2) == 0:
				sideA = append(sideA, h.id)
			default:
				sideB = append(sideB, h.id)
			}
		}
	}
	durationNs := sched.Int64Between(r, f.PartitionNsMin, f.PartitionNsMax)
	bridge := HostID(-1)
	if !isolate && f.BridgePerMille > 0 && sched.Chance(ch.kinds, f.BridgePerMille) {
		sideA, sideB, bridge = bridgeOf(ch.kinds, n, sideA, sideB)
	}
	p := &chaosPartition{endNs: n.s.NowNs() + max(durationNs, 1)}
	n.stats.Partitions++
	if bridge >= 0 {
		n.stats.Bridges++
	}
	n.s.Trace(sched.Record{Kind: "net.partition", Node: -1, A: int64(len(sideA)), B: int64(len(sideB)), C: durationNs})
	if bridge >= 0 {
		n.s.Trace(sched.Record{Kind: "net.bridge", Node: -1, A: int64(bridge)})
	}
	for _, a := range sideA {
		for _, b := range sideB {
			p.links = append(p.links, [2]HostID{a, b})
			if symmetric {
				p.links = append(p.links, [2]HostID{b, a})
			}
		}
	}
	for _, l := range p.links {
		n.link(l[0], l[1]).chaosBlocks++
		n.s.Trace(sched.Record{Kind: "net.block", Node: -1, A: int64(l[0]), B: int64(l[1])})
	}
	return p
}

// bridgeOf takes a node out of the side holding more nodes (so that both
// sides keep one) to bridge them: it is cut from neither. With fewer than
// three nodes there is no bridge, and the split stays as it was.
func bridgeOf(r *rand.Rand, n *Network, sideA, sideB []HostID) ([]HostID, []HostID, HostID) {
	nodesIn := func(side []HostID) []int {
		var at []int
		for i, id := range side {
			if n.hosts[id].isNode {
				at = append(at, i)
			}
		}
		return at
	}
	inA, inB := nodesIn(sideA), nodesIn(sideB)
	side, at := &sideA, inA
	if len(inB) > len(inA) {
		side, at = &sideB, inB
	}
	if len(at) < 2 {
		return sideA, sideB, -1
	}
	i := at[r.IntN(len(at))]
	bridge := (*side)[i]
	*side = append((*side)[:i:i], (*side)[i+1:]...)
	return sideA, sideB, bridge
}
