package admission

import (
	"fmt"
	"slices"

	"strand/core/config"
)

// RefusalReportIntervalMs is how often, at most, refused connections are
// logged: one line with their count per interval, however many were
// refused (a flood of connections must not become a flood of log lines).
const RefusalReportIntervalMs = 10_000

// Refusal names the limit that refused a connection.
type Refusal uint8

const (
	// RefusedNone: the connection was admitted.
	RefusedNone Refusal = iota
	// RefusedListener: listener.name.<l>.max.connections.
	RefusedListener
	// RefusedBroker: max.connections, for the listener's pool.
	RefusedBroker
	// RefusedIP: max.connections.per.ip, or the address's override.
	RefusedIP
	refusalKinds
)

// Key is the configuration key of the limit.
func (r Refusal) Key() string {
	switch r {
	case RefusedListener:
		return "listener.name.<l>.max.connections"
	case RefusedBroker:
		return "max.connections"
	case RefusedIP:
		return "max.connections.per.ip"
	}
	return "none"
}

// pool is a set of listeners whose connections count together, as one of
// Kafka's SocketServers: a KRaft controller serves its listeners apart from
// the broker's, so client connections never use up the controller's.
type pool uint8

const (
	poolBroker pool = iota
	poolController
	pools
)

// Admitted is one admitted connection, which Close takes back exactly once.
type Admitted struct {
	listener string
	ip       string
	pool     pool
}

// Verdict is Gate.Open's answer.
type Verdict struct {
	// ThrottleMs > 0 means not yet: a connection creation rate is exceeded.
	// The caller keeps the connection waiting (Kafka's acceptor blocks) and
	// asks again ThrottleMs later.
	ThrottleMs int64
	// Refused names the limit that refused the connection; RefusedNone if
	// it was admitted or throttled.
	Refused Refusal
}

// Admitted reports whether the connection may be served.
func (v Verdict) Admitted() bool { return v.ThrottleMs == 0 && v.Refused == RefusedNone }

// RefusalReport is what refusals are due to be logged: their count by
// limit since the last report, and the listener and address of the last.
type RefusalReport struct {
	Counts       [refusalKinds]int64
	LastListener string
	LastIP       string
	// SinceMs is when the last report was taken (or the gate made).
	SinceMs int64
}

// Total is the number of refusals in the report.
func (r RefusalReport) Total() int64 {
	var total int64
	for _, n := range r.Counts {
		total += n
	}
	return total
}

// String lists the counts by limit.
func (r RefusalReport) String() string {
	s := ""
	for kind := RefusedListener; kind < refusalKinds; kind++ {
		if n := r.Counts[kind]; n > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%d by %s", n, kind.Key())
		}
	}
	return s
}

// Gate is Kafka's ConnectionQuotas: which connections a node admits.
// Listeners are in one of two pools, the controller listeners and the
// broker listeners, each counted apart against max.connections and
// max.connection.creation.rate; every listener also has its own
// listener.name.<l>.* limits. The inter-broker listener, when it is not the
// broker's only listener, is exempt from its pool's limits (Kafka's
// protected listener, KIP-402): clients cannot fill it up. Each pool also
// counts connections per client address (max.connections.per.ip).
type Gate struct {
	connectionsMax         int32
	listenerConnectionsMax map[string]int32
	perIPMax               int32
	perIPOverrides         map[string]int32
	controllerListeners    []string
	protectedListener      string

	total    [pools]int32
	listener map[string]int32
	perIP    [pools]map[string]int32
	poolRate [pools]*rateLimit
	// listenerRate holds each listener's own rate limit, if it has one.
	listenerRate map[string]*rateLimit

	pending        RefusalReport
	refusedTotal   [refusalKinds]int64
	lastReportMs   int64
	reportedBefore bool
}

// NewGate builds the gate of a node configured by cfg. ipOverrides is
// max.connections.per.ip.overrides with host names resolved to addresses
// (the caller's job: resolving is I/O); nil takes cfg's as they are.
func NewGate(cfg config.Broker, ipOverrides map[string]int32, nowMs int64) *Gate {
	if ipOverrides == nil {
		ipOverrides = cfg.Limits.ConnectionsPerIPOverrides
	}
	g := &Gate{
		connectionsMax:         cfg.Limits.ConnectionsMax,
		listenerConnectionsMax: cfg.Limits.ListenerConnectionsMax,
		perIPMax:               cfg.Limits.ConnectionsPerIPMax,
		perIPOverrides:         ipOverrides,
		controllerListeners:    cfg.ControllerListenerNames,
		listener:               map[string]int32{},
		listenerRate:           map[string]*rateLimit{},
		lastReportMs:           nowMs,
	}
	brokerListeners := 0
	for _, l := range cfg.Listeners {
		if !slices.Contains(cfg.ControllerListenerNames, l.Name) {
			brokerListeners++
		}
	}
	if brokerListeners > 1 {
		g.protectedListener = cfg.InterBrokerListenerName
	}
	for p := range pools {
		g.perIP[p] = map[string]int32{}
		g.poolRate[p] = newRateLimit(cfg.Limits.ConnectionCreationRateMax, nowMs)
	}
	for _, l := range cfg.Listeners {
		if rate, ok := cfg.Limits.ListenerConnectionCreationRateMax[l.Name]; ok {
			g.listenerRate[l.Name] = newRateLimit(rate, nowMs)
		}
	}
	g.pending.SinceMs = nowMs
	return g
}

// poolOf is the pool listener's connections count in.
func (g *Gate) poolOf(listener string) pool {
	if slices.Contains(g.controllerListeners, listener) {
		return poolController
	}
	return poolBroker
}

// Open decides on a new connection from client address ip (as the node
// sees it, without a port) on listener, at nowMs. An admitted connection
// is counted until Close; a throttled one is not counted, and its caller
// asks again later; a refused one is counted among the refusals.
func (g *Gate) Open(listener, ip string, nowMs int64) (Admitted, Verdict) {
	p := g.poolOf(listener)
	protected := listener == g.protectedListener
	if throttle := g.throttleMs(p, listener, protected, nowMs); throttle > 0 {
		return Admitted{}, Verdict{ThrottleMs: throttle}
	}
	refused := RefusedNone
	switch {
	case g.listener[listener] >= g.listenerMax(listener):
		refused = RefusedListener
	case !protected && g.total[p] >= g.connectionsMax:
		refused = RefusedBroker
	case g.perIP[p][ip] >= g.ipMax(ip):
		refused = RefusedIP
	}
	if refused != RefusedNone {
		g.pending.Counts[refused]++
		g.pending.LastListener, g.pending.LastIP = listener, ip
		g.refusedTotal[refused]++
		return Admitted{}, Verdict{Refused: refused}
	}
	g.total[p]++
	g.listener[listener]++
	g.perIP[p][ip]++
	return Admitted{listener: listener, ip: ip, pool: p}, Verdict{}
}

// throttleMs takes a token from the listener's rate limit and, unless the
// listener is protected, its pool's; if either has none, it takes nothing
// and returns how long until both would have one.
func (g *Gate) throttleMs(p pool, listener string, protected bool, nowMs int64) int64 {
	limits := make([]*rateLimit, 0, 2)
	if !protected {
		limits = append(limits, g.poolRate[p])
	}
	if l := g.listenerRate[listener]; l != nil {
		limits = append(limits, l)
	}
	var wait int64
	for _, l := range limits {
		wait = max(wait, l.waitMs(nowMs))
	}
	if wait > 0 {
		return wait
	}
	for _, l := range limits {
		l.take()
	}
	return 0
}

func (g *Gate) listenerMax(listener string) int32 {
	if n, ok := g.listenerConnectionsMax[listener]; ok {
		return n
	}
	return maxInt32
}

func (g *Gate) ipMax(ip string) int32 {
	if n, ok := g.perIPOverrides[ip]; ok {
		return n
	}
	return g.perIPMax
}

// Close takes back an admitted connection.
func (g *Gate) Close(a Admitted) {
	if a.listener == "" {
		panic("admission: closing a connection the gate did not admit")
	}
	g.total[a.pool]--
	g.listener[a.listener]--
	g.perIP[a.pool][a.ip]--
	if g.total[a.pool] < 0 || g.listener[a.listener] < 0 || g.perIP[a.pool][a.ip] < 0 {
		panic(fmt.Sprintf("admission: connection counts below zero closing %+v", a))
	}
	if g.perIP[a.pool][a.ip] == 0 {
		delete(g.perIP[a.pool], a.ip)
	}
}

// Connections returns the admitted connections on listener.
func (g *Gate) Connections(listener string) int32 { return g.listener[listener] }

// RefusedTotal returns every refusal so far, by limit.
func (g *Gate) RefusedTotal() [refusalKinds]int64 { return g.refusedTotal }

// RefusalsDue returns the refusals not yet reported if there are any and
// intervalMs has passed since the last report (the first is due at once),
// and starts a new report. Callers pass RefusalReportIntervalMs.
func (g *Gate) RefusalsDue(nowMs, intervalMs int64) (RefusalReport, bool) {
	if g.pending.Total() == 0 || (g.reportedBefore && nowMs-g.lastReportMs < intervalMs) {
		return RefusalReport{}, false
	}
	report := g.pending
	g.pending = RefusalReport{SinceMs: nowMs}
	g.lastReportMs, g.reportedBefore = nowMs, true
	return report, true
}

const maxInt32 = 1<<31 - 1

// rateLimit is a token bucket of ratePerSec tokens a second, holding at
// most a second's worth: max.connection.creation.rate. Tokens are counted
// in thousandths so that refills by the millisecond stay integers.
type rateLimit struct {
	ratePerSec  int64
	milliTokens int64
	lastMs      int64
}

func newRateLimit(ratePerSec int32, nowMs int64) *rateLimit {
	return &rateLimit{ratePerSec: int64(ratePerSec), milliTokens: int64(ratePerSec) * 1000, lastMs: nowMs}
}

// waitMs refills the bucket to nowMs and returns how long until it holds a
// whole token (0: it does now).
func (l *rateLimit) waitMs(nowMs int64) int64 {
	if l.ratePerSec >= maxInt32 {
		return 0 // Kafka's default: unlimited
	}
	if nowMs > l.lastMs {
		l.milliTokens = min(l.milliTokens+(nowMs-l.lastMs)*l.ratePerSec, l.ratePerSec*1000)
		l.lastMs = nowMs
	}
	if l.milliTokens >= 1000 {
		return 0
	}
	if l.ratePerSec == 0 {
		return RefusalReportIntervalMs // a rate of 0 admits nothing: ask again much later
	}
	return (1000 - l.milliTokens + l.ratePerSec - 1) / l.ratePerSec
}

// take spends a token waitMs found.
func (l *rateLimit) take() {
	if l.ratePerSec >= maxInt32 {
		return
	}
	if l.milliTokens < 1000 {
		panic("admission: a connection token taken from an empty bucket")
	}
	l.milliTokens -= 1000
}
