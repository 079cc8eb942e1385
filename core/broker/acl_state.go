package broker

// The broker's authorization state (SPEC.md §10.7): the authorizer built
// from the ACLs of the metadata this node has applied, how fresh that
// metadata is known to be, and the audit of denials.
//
// A broker decides with the ACLs of the committed metadata prefix its image
// holds: never a set the cluster did not commit, never an older one than
// it used before. It knows its image was the committed state at the time
// it sent a metadata fetch whose answer brought it up to the high
// watermark that answer named; a broker that cannot say so for
// broker.session.timeout.ms (cut off from the controller, or starting)
// refuses to authorize for anyone but super users, closing the connection,
// as a broker that is down would look: a client retries elsewhere, and no
// revoked permission outlives its revocation by more than that bound
// anywhere in the cluster.

import (
	"fmt"
	"log/slog"
	"slices"

	"strand/core/acl"
	"strand/core/metadata"
)

// aclState is the node's authorizer and what it was built from: the part
// of the node that authorizes requests (authorize.go). The metadata
// follower rebuilds it as ACL records apply; the parts that serve APIs
// decide through current, the authorization of the request whose handler
// is running.
type aclState struct {
	*nodeEnv
	// authorizer decides with the image's ACLs; nil while
	// authorizer.class.name is unset (everything allowed).
	authorizer *acl.Authorizer
	// freshAsOfNs is the monotonic time at which this node last knew its
	// image to be the committed metadata: when it sent the metadata fetch
	// whose answer brought it to the answer's high watermark. -1: never.
	freshAsOfNs int64
	// kept are the ACLs the planted bug acl-stale-forever never lets go.
	kept  []acl.ACL
	audit auditLog
	// current is the authorization of the request whose handler is
	// running, set by HandleRequest for the handler's synchronous part
	// (handlers that answer later keep a copy).
	current grants
}

// newACLState is the state of a node that has applied nothing yet: with
// authorizer.class.name set, an authorizer without ACLs.
func newACLState(e *nodeEnv) *aclState {
	a := &aclState{nodeEnv: e, freshAsOfNs: -1, audit: auditLog{logged: map[auditKey]int64{}}}
	if e.cfg.Broker.AuthorizerEnabled {
		a.authorizer = acl.New(a.config(), nil)
	}
	return a
}

// config is what the authorizer decides with besides the ACLs.
func (a *aclState) config() acl.Config {
	b := a.cfg.Broker
	return acl.Config{SuperUsers: b.SuperUsers, AllowEveryoneIfNoACLFound: b.AllowEveryoneIfNoACLFound, Bugs: a.cfg.Bugs.ACL}
}

// rebuild builds the authorizer from im's ACLs and reports whether it
// changed; a node without authorizer.class.name has none. Under the
// planted bug acl-stale-forever an ACL once seen is never dropped.
func (a *aclState) rebuild(im *metadata.Image) bool {
	if !a.cfg.Broker.AuthorizerEnabled {
		return false
	}
	acls := im.ACLs()
	if a.cfg.Bugs.ACLStaleForever {
		for _, x := range acls {
			if !slices.ContainsFunc(a.kept, func(k acl.ACL) bool { return k.ID == x.ID }) {
				a.kept = append(a.kept, x)
			}
		}
		acls = slices.Clone(a.kept)
	}
	a.authorizer = acl.New(a.config(), acl.NewSet(acls))
	return true
}

// EffectiveACLs are the ACLs this node decides with, sorted: what the
// simulator's acl-agreement check compares with the controller's log.
// nil while the authorizer is off.
func (n *Node) EffectiveACLs() []acl.Binding {
	if n.acls.authorizer == nil {
		return nil
	}
	var out []acl.Binding
	for _, a := range n.acls.authorizer.ACLs().All() {
		out = append(out, a.Binding)
	}
	return out
}

// noteCaughtUp records that the image, whose last record is at
// imageOffset, reached highWatermark, the committed end a metadata fetch
// sent at sentNs was answered with.
func (a *aclState) noteCaughtUp(sentNs, imageOffset, highWatermark int64) {
	if imageOffset+1 >= highWatermark && sentNs > a.freshAsOfNs {
		a.freshAsOfNs = sentNs
	}
}

// fresh reports whether this node's ACLs were the committed ones within
// broker.session.timeout.ms.
func (a *aclState) fresh() bool {
	boundNs := int64(a.cfg.Broker.BrokerSessionTimeoutMs) * 1e6
	return a.freshAsOfNs >= 0 && a.clock.MonotonicNs()-a.freshAsOfNs <= boundNs
}

// Limits of the audit of denials.
const (
	// auditIntervalMs: a denial of one (principal, host, operation,
	// resource) is logged at most once per interval, so a client retrying
	// a refused request does not flood the log.
	auditIntervalMs = 60_000
	// auditKeysMax bounds the denials remembered for that: past it, the
	// expired are forgotten, and if none has expired a denial is logged
	// without being remembered (logged more often, never less).
	auditKeysMax = 10_000
)

// auditKey is what one audit line is about.
type auditKey struct {
	principal, host string
	action          acl.Action
}

// auditLog remembers when each denial was last logged.
type auditLog struct {
	logged map[auditKey]int64
}

// auditDenial logs a denial once per auditIntervalMs per principal, host,
// operation and resource, with the request's API and the rule that
// decided, as Kafka's authorizer logger does.
func (a *aclState) auditDenial(who acl.Requester, x acl.Action, api string, d acl.Decision) {
	audit := &a.audit
	key := auditKey{who.Principal, who.Host, x}
	nowMs := a.nowMs()
	if last, ok := audit.logged[key]; ok && nowMs-last < auditIntervalMs {
		return
	}
	if _, ok := audit.logged[key]; !ok && len(audit.logged) >= auditKeysMax {
		for k, at := range audit.logged { // order-independent: deletes every expired entry
			if nowMs-at >= auditIntervalMs {
				delete(audit.logged, k)
			}
		}
	}
	if _, ok := audit.logged[key]; ok || len(audit.logged) < auditKeysMax {
		audit.logged[key] = nowMs
	}
	a.cfg.Log.Info("authorization denied",
		slog.String("principal", who.Principal), slog.String("host", who.Host),
		slog.String("operation", x.Operation.String()),
		slog.String("resource", fmt.Sprintf("%v:LITERAL:%s", x.Type, x.Name)),
		slog.String("api", api), slog.String("rule", d.String()))
}

// ControllerACLs are the ACLs of the metadata this node's controller has
// committed, sorted, and the offset of the last record applied; false
// without the controller role. The simulator's acl-agreement check
// compares every broker's EffectiveACLs with the active controller's once
// every broker's image has reached that offset.
func (n *Node) ControllerACLs() (acls []acl.Binding, offset int64, ok bool) {
	ctrl := n.controllerRole.ctrl
	if ctrl == nil {
		return nil, -1, false
	}
	im := ctrl.Image()
	for _, a := range im.ACLs() {
		acls = append(acls, a.Binding)
	}
	return acls, im.Offset(), true
}
