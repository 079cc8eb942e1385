package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// resolve derives the effective values of keys that depend on others and
// checks the combinations Kafka's KafkaConfig.validateValues checks for a
// KRaft node, each error naming the key to fix.
func (b *builder) resolve() error {
	if err := b.resolveIdentity(); err != nil {
		return err
	}
	if err := b.resolveStorage(); err != nil {
		return err
	}
	if err := b.resolveListeners(); err != nil {
		return err
	}
	if err := b.resolveQuorum(); err != nil {
		return err
	}
	if b.Roles.Broker {
		if err := b.resolveBrokerListeners(); err != nil {
			return err
		}
	}
	if err := b.resolveAuthentication(); err != nil {
		return err
	}
	if err := b.resolveSecurity(); err != nil {
		return err
	}
	return b.checkLimits()
}

// resolveIdentity requires process.roles and node.id: Strand runs KRaft only.
func (b *builder) resolveIdentity() error {
	if !b.Roles.Broker && !b.Roles.Controller {
		return keyError("process.roles", "is required: set broker, controller or both (Strand runs in KRaft mode only)")
	}
	if _, ok := b.explicit["node.id"]; !ok {
		return keyError("node.id", "is required when process.roles is set")
	}
	return nil
}

// resolveStorage applies log.dirs over log.dir and the retention and roll
// precedence (ms over minutes over hours).
func (b *builder) resolveStorage() error {
	b.LogDirs = b.logDirs
	if !b.logDirsSet {
		b.LogDirs = []string{b.logDir}
	}
	if len(b.LogDirs) == 0 || b.LogDirs[0] == "" {
		return keyError("log.dirs", "is empty: at least one log directory must be set in log.dirs or log.dir")
	}
	for i, dir := range b.LogDirs {
		if slices.Contains(b.LogDirs[:i], dir) {
			return valueError("log.dirs", strings.Join(b.LogDirs, ","), "lists directory %s twice", dir)
		}
	}

	retentionKey := "log.retention.hours"
	b.LogRetentionMs = int64(b.retentionHours) * 60 * 60 * 1000
	switch {
	case b.retentionMs != nil:
		retentionKey, b.LogRetentionMs = "log.retention.ms", *b.retentionMs
	case b.retentionMinutes != nil:
		retentionKey, b.LogRetentionMs = "log.retention.minutes", int64(*b.retentionMinutes)*60*1000
	}
	if b.LogRetentionMs < 0 {
		b.LogRetentionMs = -1
	}
	if b.LogRetentionMs == 0 {
		return valueError(retentionKey, b.explicit[retentionKey], "is invalid: retention must be unlimited (-1) or at least 1 ms")
	}

	b.LogRollMs = int64(b.rollHours) * 60 * 60 * 1000
	if b.rollMs != nil {
		b.LogRollMs = *b.rollMs
	}
	return nil
}

// resolveListeners gives each listener its security protocol and checks the
// controller listener names. Unless listener.security.protocol.map is set
// explicitly, controller listeners map to PLAINTEXT, as Kafka does in KRaft
// mode.
func (b *builder) resolveListeners() error {
	b.ListenerSecurityProtocols = b.protocolMap
	if _, explicit := b.explicit["listener.security.protocol.map"]; !explicit {
		for _, name := range b.ControllerListenerNames {
			if _, ok := b.ListenerSecurityProtocols[name]; !ok {
				b.ListenerSecurityProtocols[name] = SecurityProtocolPlaintext
			}
		}
	}
	if len(b.ControllerListenerNames) == 0 {
		return keyError("controller.listener.names", "is required: name the listener(s) controllers talk on")
	}
	for _, name := range b.ControllerListenerNames {
		if _, ok := b.ListenerSecurityProtocols[name]; !ok {
			return keyError("listener.security.protocol.map",
				"has no security protocol for controller listener %s (named in controller.listener.names)", name)
		}
	}
	listeners, err := b.withProtocols("listeners", b.listeners)
	if err != nil {
		return err
	}
	if len(listeners) == 0 {
		return keyError("listeners", "is empty: at least one listener is required")
	}
	for i, l := range listeners {
		for _, earlier := range listeners[:i] {
			if l.Port != 0 && earlier.Port == l.Port && earlier.Host == l.Host {
				return valueError("listeners", b.explicit["listeners"], "has listeners %s and %s on the same address", earlier.Name, l.Name)
			}
		}
	}
	b.Listeners = listeners

	return nil
}

// withProtocols resolves the security protocol of each listener. Whether
// the environment serves it is the environment's to check
// (Broker.CheckProtocolsServed).
func (b *builder) withProtocols(key string, raw []rawListener) ([]Listener, error) {
	listeners := make([]Listener, 0, len(raw))
	for _, r := range raw {
		protocol, ok := b.ListenerSecurityProtocols[r.name]
		if !ok {
			return nil, keyError(key, "listener %s has no security protocol: add %s:PLAINTEXT to listener.security.protocol.map", r.name, r.name)
		}
		listeners = append(listeners, Listener{Name: r.name, Host: r.host, Port: r.port, SecurityProtocol: protocol})
	}
	return listeners, nil
}

// isControllerListener reports whether name is in controller.listener.names.
func (b *builder) isControllerListener(name string) bool {
	return slices.Contains(b.ControllerListenerNames, name)
}

// resolveQuorum checks controller.quorum.voters against this node's roles and
// listeners.
func (b *builder) resolveQuorum() error {
	if len(b.QuorumVoters) == 0 {
		if b.bootstrapServersSet {
			return keyError("controller.quorum.voters", "is required: Strand runs a static controller quorum only; "+
				"controller.quorum.bootstrap.servers (a KIP-853 dynamic quorum) is not implemented, so list the controllers as id@host:port,...")
		}
		return keyError("controller.quorum.voters", "is required: list the controllers as id@host:port,...")
	}
	isVoter := false
	for _, v := range b.QuorumVoters {
		isVoter = isVoter || v.ID == b.NodeID
	}
	var listening []string
	for _, l := range b.Listeners {
		if b.isControllerListener(l.Name) {
			listening = append(listening, l.Name)
		}
	}
	if !b.Roles.Controller {
		if isVoter {
			return keyError("controller.quorum.voters", "lists node %d, but process.roles=broker: only controllers are voters", b.NodeID)
		}
		if len(listening) > 0 {
			return keyError("listeners", "has controller listener %s, but process.roles=broker: a broker-only node must not listen for controllers", listening[0])
		}
		return nil
	}
	if !isVoter {
		return keyError("controller.quorum.voters", "does not list this node (node.id %d), but process.roles contains controller", b.NodeID)
	}
	for _, name := range b.ControllerListenerNames {
		if !slices.Contains(listening, name) {
			return keyError("controller.listener.names", "names %s, which is not in listeners: a controller must listen on its controller listeners", name)
		}
	}
	if !b.Roles.Broker {
		for _, l := range b.Listeners {
			if !b.isControllerListener(l.Name) {
				return keyError("listeners", "has listener %s, which is not a controller listener, but process.roles=controller", l.Name)
			}
		}
		if _, set := b.explicit["inter.broker.listener.name"]; set && b.isControllerListener(b.InterBrokerListenerName) {
			return keyError("inter.broker.listener.name", "names a controller listener")
		}
	}
	return nil
}

// resolveBrokerListeners derives the advertised broker listeners and the
// inter-broker listener.
func (b *builder) resolveBrokerListeners() error {
	advertised := b.Listeners
	if b.advertisedSet {
		var err error
		if advertised, err = b.withProtocols("advertised.listeners", b.advertised); err != nil {
			return err
		}
	}
	b.AdvertisedListeners = nil
	for _, l := range advertised {
		if b.isControllerListener(l.Name) {
			continue
		}
		if l.Host == "0.0.0.0" {
			return keyError("advertised.listeners", "listener %s advertises 0.0.0.0, which clients cannot connect to: give a routable address", l.Name)
		}
		if !slices.ContainsFunc(b.Listeners, func(own Listener) bool { return own.Name == l.Name }) {
			return keyError("advertised.listeners", "has listener %s, which is not in listeners", l.Name)
		}
		b.AdvertisedListeners = append(b.AdvertisedListeners, l)
	}
	if len(b.AdvertisedListeners) == 0 {
		return keyError("listeners", "has no broker listener: every listener is in controller.listener.names")
	}
	if _, set := b.explicit["inter.broker.listener.name"]; !set {
		for _, l := range b.Listeners {
			if !b.isControllerListener(l.Name) {
				b.InterBrokerListenerName = l.Name
				break
			}
		}
	}
	if b.isControllerListener(b.InterBrokerListenerName) {
		return keyError("inter.broker.listener.name", "names controller listener %s: replication needs a broker listener", b.InterBrokerListenerName)
	}
	if !slices.ContainsFunc(b.AdvertisedListeners, func(l Listener) bool { return l.Name == b.InterBrokerListenerName }) {
		return keyError("inter.broker.listener.name", "names %s, which is not an advertised broker listener", b.InterBrokerListenerName)
	}
	return nil
}

// checkLimits checks limits against each other, and warns where Kafka only
// logs an error.
func (b *builder) checkLimits() error {
	if q := b.Limits.RequestBytesQueuedMax; q > 0 && q < int64(b.SocketRequestMaxBytes) {
		return keyError("queued.max.request.bytes", "is %d, less than socket.request.max.bytes (%d): one largest request would never fit", q, b.SocketRequestMaxBytes)
	}
	if c := b.Limits.ConnectionBufferedBytesMax; c < int64(b.SocketRequestMaxBytes) {
		return keyError("strand.connection.buffered.bytes.max", "is %d, less than socket.request.max.bytes (%d): one largest request would never fit", c, b.SocketRequestMaxBytes)
	}
	for _, limits := range []struct {
		key string
		m   map[string]int32
	}{{"max.connections", b.Limits.ListenerConnectionsMax}, {"max.connection.creation.rate", b.Limits.ListenerConnectionCreationRateMax}} {
		for _, listener := range slices.Sorted(maps.Keys(limits.m)) {
			if !slices.ContainsFunc(b.Listeners, func(l Listener) bool { return l.Name == listener }) {
				return keyError("listener.name."+strings.ToLower(listener)+"."+limits.key, "names listener %s, which is not in listeners", listener)
			}
		}
	}
	if b.Limits.ConnectionsPerIPMax == 0 && len(b.Limits.ConnectionsPerIPOverrides) == 0 {
		return keyError("max.connections.per.ip", "is 0 with no max.connections.per.ip.overrides: no client could connect")
	}
	if int64(b.BrokerHeartbeatIntervalMs)*2 > int64(b.BrokerSessionTimeoutMs) {
		b.warnings = append(b.warnings, Warning{Key: "broker.heartbeat.interval.ms", Message: fmt.Sprintf(
			"%d ms is more than half of broker.session.timeout.ms (%d ms): a broker may lose its session between heartbeats",
			b.BrokerHeartbeatIntervalMs, b.BrokerSessionTimeoutMs)})
	}
	return nil
}
