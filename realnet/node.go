package realnet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"strand/core/broker"
	"strand/core/config"
	"strand/core/env"
	"strand/core/quorum"
	"strand/diskio"
	"strand/realnet/auth"
)

// closeFlushTimeout bounds the last phase of a shutdown: flushing every log
// and writing the clean-shutdown marker.
const closeFlushTimeout = 30 * time.Second

// Options says how to start a node.
type Options struct {
	// Config is the node's server.properties. Its log directories must
	// exist (strand serve formats them first).
	Config config.Broker
	// Logger receives structured logs, realnet's and the core's (the
	// caller binds the node id); nil discards them.
	Logger *slog.Logger
	// Listeners are already-bound listeners by listener name, used instead
	// of binding Config.Listeners' addresses: tests bind port 0 first so
	// that the ports can be written into every node's configuration.
	Listeners map[string]net.Listener
	// ClusterID is the cluster.id the log directories were formatted
	// with, which Metadata and DescribeCluster report; empty derives it
	// from the quorum voters (broker.Config.ClusterID).
	ClusterID string
	// Krb5Config is the krb5.conf path Kerberos logins read (KDCs, default
	// realm, clock skew); empty means $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Config string
	// OfflineLogDirs are log directories (as Config.LogDirs names them)
	// found unusable before the start, each with its cause: strand serve
	// puts here a directory whose meta.properties it could not read or
	// write. Each starts offline, like one diskio cannot open (see Start).
	OfflineLogDirs map[string]error
	// LogDirLocks are locks the caller already holds on log directories
	// (strand serve takes them before it formats). Start takes them over:
	// the node releases them when it stops, or Start when it fails. Start
	// locks every other usable log directory itself.
	LogDirLocks []*diskio.DirLock
}

// Node is one running Strand process: the core node on its event loop, its
// log directories on diskio, and its listeners.
type Node struct {
	cfg    config.Broker
	logger *slog.Logger
	loop   *Loop
	net    *Network
	disks  []*diskio.Disk
	// locks hold the log directories (diskio.LockDir) until stop.
	locks []*diskio.DirLock
	core  *broker.Node
	addrs map[string]net.Addr
	// security is the listeners' loaded authentication; its Kerberos
	// logins end with the node.
	security *auth.Security

	// waitingMu guards waiting: the broker listeners, bound but not served
	// until the core's initial metadata catch-up (serveWaitingListeners).
	waitingMu sync.Mutex
	waiting   []namedListener
}

// namedListener is a bound listener and its listener name.
type namedListener struct {
	name string
	ln   net.Listener
}

// Start builds and starts a node: the event loop, one diskio.Disk per log
// directory (its Sync completions posted to the loop), the listeners (all
// bound at once), the core node (made on the loop), then it serves the
// controller listeners. The broker listeners are served only once the core
// reports the broker caught up with the metadata log and unfenced
// (broker.Config.OnInitialUnfence), as a Kafka broker enables them only
// after lifecycleManager's initialUnfenceFuture: before it, the node would
// answer from an image that may lack the cluster's topics, or that names no
// live broker and no controller. Clients connecting meanwhile wait in the
// listen backlog. Start does not wait for it. On error everything started
// is stopped.
//
// A log directory other than the first that diskio cannot open, or that
// is in Options.OfflineLogDirs, is handed to the core as an offlineDisk:
// the core starts it offline (log.FailedManager), logs it once at ERROR
// with its cause, and the broker runs fenced on the others, as Kafka's
// LogManager starts without the directories it cannot load (SPEC §3.5).
// The first one, which holds the metadata log and the clean-shutdown
// marker, refuses the start, as Kafka stops when its metadata log
// directory fails.
//
// Every usable log directory is locked first (diskio.LockDir, Kafka's
// .lock), and held until the node stops: a directory another process (or
// another node of this one) uses refuses the start, naming it and the
// holder's pid; one that cannot be locked for an I/O error is unusable as
// above.
func Start(opts Options) (*Node, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := opts.Config
	fail := func(err error) (*Node, error) {
		for _, l := range opts.Listeners {
			l.Close()
		}
		for _, l := range opts.LogDirLocks {
			l.Release()
		}
		return nil, err
	}
	if err := cfg.CheckProtocolsServed(servedSecurityProtocols); err != nil {
		return fail(err)
	}
	if err := cfg.CheckAuthenticationComplete(); err != nil {
		return fail(err)
	}
	// Authentication first: a node that cannot log in to its KDC or read
	// its certificates does not start (SPEC.md §10.6).
	scram := &scramStore{}
	security, err := auth.Load(cfg, auth.Options{Krb5Config: opts.Krb5Config, Logger: logger, Scram: scram.lookup})
	if err != nil {
		return fail(err)
	}
	n := &Node{cfg: cfg, logger: logger, loop: NewLoop(), addrs: map[string]net.Addr{}, locks: opts.LogDirLocks, security: security}
	go n.loop.Run()
	if n.net, err = newNetwork(n.loop, cfg, logger); err != nil {
		n.loop.Stop()
		return fail(err)
	}
	n.net.security = security
	n.net.scram = scram
	n.net.peers.security = newPeerSecurity(cfg, security)
	ok := false
	defer func() {
		if !ok {
			n.Kill()
			for _, l := range opts.Listeners {
				l.Close()
			}
		}
	}()

	envDisks := make([]env.Disk, 0, len(cfg.LogDirs))
	for i, dir := range cfg.LogDirs {
		cause := opts.OfflineLogDirs[dir]
		if cause == nil {
			cause = n.lockLogDir(dir)
			if errors.Is(cause, diskio.ErrDirInUse) {
				return nil, cause
			}
		}
		if cause == nil {
			// Enqueue, not Post: the Sync worker must not run the core, which
			// queues Syncs for it and whose completions must not wait behind it.
			d, err := diskio.New(dir, diskio.Options{Post: func(fn func()) { n.loop.Enqueue(fn) }})
			if err == nil {
				n.disks = append(n.disks, d)
				envDisks = append(envDisks, d)
				continue
			}
			cause = err
		}
		if i == 0 {
			return nil, fmt.Errorf("log dir %s, the first, which holds the metadata log: %w", dir, cause)
		}
		envDisks = append(envDisks, offlineDisk{err: fmt.Errorf("%w: %w", env.ErrIO, cause), post: func(fn func()) { n.loop.Enqueue(fn) }})
	}

	bound := make([]namedListener, 0, len(cfg.Listeners))
	defer func() {
		if !ok {
			for _, l := range bound {
				l.ln.Close()
			}
		}
	}()
	for _, l := range cfg.Listeners {
		ln := opts.Listeners[l.Name]
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", l.Address()); err != nil {
				return nil, fmt.Errorf("listener %s: %w", l, err)
			}
		}
		n.addrs[l.Name] = ln.Addr()
		bound = append(bound, namedListener{l.Name, ln})
	}
	// No lock yet: the loop's serveWaitingListeners cannot run before the
	// core exists.
	var serveNow []namedListener
	for _, l := range bound {
		if cfg.Roles.Broker && !slices.Contains(cfg.ControllerListenerNames, l.name) {
			n.waiting = append(n.waiting, l)
		} else {
			serveNow = append(serveNow, l)
		}
	}
	if len(n.waiting) > 0 {
		logger.Info("broker listeners wait until the broker has caught up with the metadata log and been unfenced")
	}

	n.loop.Call(func() {
		coreCfg := broker.Config{Broker: cfg, ClusterID: opts.ClusterID, OnInitialUnfence: n.serveWaitingListeners, Log: newCoreLogger(logger)}
		n.core, err = broker.New(coreCfg, NewClock(n.loop), n.net, envDisks, randomID)
		if err == nil {
			n.net.setHandler(n.core, n.core.AdvertisedVersions, n.core.AcceptedVersions())
			n.net.peers.brokerAddress = n.brokerAddress
		}
	})
	if err != nil {
		return nil, err
	}
	if n.core == nil {
		return nil, errors.New("realnet: event loop stopped while starting the node")
	}

	for _, l := range serveNow {
		if err := n.net.Serve(l.name, l.ln); err != nil {
			return nil, err
		}
		logger.Info("listening", "listener", l.name, "address", l.ln.Addr().String())
	}
	ok = true
	return n, nil
}

// lockLogDir locks dir unless the node holds its lock already.
func (n *Node) lockLogDir(dir string) error {
	for _, l := range n.locks {
		if l.Dir() == dir {
			return nil
		}
	}
	l, err := diskio.LockDir(dir)
	if err != nil {
		return err
	}
	n.locks = append(n.locks, l)
	return nil
}

// serveWaitingListeners serves the broker listeners: the core's
// OnInitialUnfence, on the loop. It holds waitingMu while it serves them,
// so that a concurrent Shutdown's closeWaitingListeners either finds them
// served (and its CloseListeners closes them) or closes them unserved.
func (n *Node) serveWaitingListeners() {
	n.waitingMu.Lock()
	defer n.waitingMu.Unlock()
	waiting := n.waiting
	n.waiting = nil
	for _, l := range waiting {
		if err := n.net.Serve(l.name, l.ln); err != nil {
			n.logger.Warn("cannot serve listener", "listener", l.name, "err", err)
			continue
		}
		n.logger.Info("caught up with the metadata log and unfenced; listening", "listener", l.name, "address", l.ln.Addr().String())
	}
}

// closeWaitingListeners closes the broker listeners never served.
func (n *Node) closeWaitingListeners() {
	n.waitingMu.Lock()
	defer n.waitingMu.Unlock()
	for _, l := range n.waiting {
		l.ln.Close()
	}
	n.waiting = nil
}

// brokerAddress resolves a broker's inter-broker listener from the metadata
// image. It runs on the loop (Send's caller).
func (n *Node) brokerAddress(id env.NodeID) (string, bool) {
	e, ok := n.core.Image().BrokerEndpoint(int32(id), n.cfg.InterBrokerListenerName)
	if !ok {
		return "", false
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), true
}

// Addr returns the bound address of the listener named name, or nil.
func (n *Node) Addr(name string) net.Addr { return n.addrs[name] }

// Call runs fn on the node's event loop and waits for it, for inspection in
// tests and tools; false if the loop has stopped.
func (n *Node) Call(fn func(*broker.Node)) bool {
	return n.loop.Call(func() { fn(n.core) })
}

// ErrControlledShutdownIncomplete is what Shutdown reports, after stopping
// the node anyway, when the controller did not release the broker before the
// deadline: its leaderships moved by session expiry instead.
var ErrControlledShutdownIncomplete = errors.New("controlled shutdown did not complete before the deadline")

// Shutdown stops the node gracefully: a controlled shutdown first (the
// broker keeps serving while the controller moves its leaderships away),
// bounded by ctx; then the listeners and connections close, the core closes
// its logs (flushing them and marking the shutdown clean when the controlled
// shutdown completed), and the loop and disks stop.
//
// A voter gives the controlled shutdown up early, with a warning and no
// error, when no controller quorum can form (watchQuorum): the other voters
// have stopped, as when a whole cluster is stopped at once, so no
// controller will ever answer. Kafka's broker waits out its deadline then,
// and logs an error; waiting for what cannot happen only delays the
// operator's stop. Its logs are then flushed and marked clean, as after a
// completed controlled shutdown (broker.Node.AbandonControlledShutdown).
func (n *Node) Shutdown(ctx context.Context) error {
	controlled := make(chan struct{})
	if !n.loop.Call(func() { n.core.BeginShutdown(func() { close(controlled) }) }) {
		return errors.New("realnet: event loop already stopped")
	}
	stopWatching := make(chan struct{})
	quorumLost, watcherDone := n.watchQuorum(stopWatching)
	var incomplete error
	select {
	case <-controlled:
		n.logger.Info("controlled shutdown complete")
	case reason := <-quorumLost:
		abandoned := false
		n.loop.Call(func() { abandoned = n.core.AbandonControlledShutdown() })
		if abandoned {
			n.logger.Warn("giving up the controlled shutdown: no controller quorum can form", "reason", reason)
		} else {
			n.logger.Info("controlled shutdown complete")
		}
	case <-ctx.Done():
		incomplete = fmt.Errorf("%w: %w", ErrControlledShutdownIncomplete, ctx.Err())
		n.logger.Warn("controlled shutdown did not complete in time; closing anyway", "err", ctx.Err())
	}
	close(stopWatching)
	<-watcherDone
	n.closeWaitingListeners() // first: see serveWaitingListeners
	n.net.CloseListeners()
	closed := make(chan error, 1)
	n.loop.Call(func() { n.core.Close(func(err error) { closed <- err }) })
	var closeErr error
	select {
	case closeErr = <-closed:
	case <-time.After(closeFlushTimeout):
		closeErr = fmt.Errorf("realnet: closing the logs took over %s", closeFlushTimeout)
	}
	n.stop(true)
	return errors.Join(incomplete, closeErr)
}

// quorumCheckInterval is how often a voter in a controlled shutdown checks
// whether a controller quorum can still form, and quorumLostChecks how
// many checks in a row must find it cannot before the node gives up: a
// voter restarting, or an election under way, passes within that time.
const (
	quorumCheckInterval = 500 * time.Millisecond
	quorumLostChecks    = 3
)

// voterDialTimeout bounds the probe of another voter's controller
// listener. A stopped voter on a reachable host refuses at once.
const voterDialTimeout = 500 * time.Millisecond

// watchQuorum watches, until stop closes, whether a controller quorum can
// form, for a node that is itself a voter (others never give up: they
// cannot tell a stopped quorum from an unreachable one). lost receives the
// reason once quorumLostChecks checks in a row found none could; done
// closes when the watcher has exited.
func (n *Node) watchQuorum(stop <-chan struct{}) (lost <-chan string, done <-chan struct{}) {
	lostCh, doneCh := make(chan string, 1), make(chan struct{})
	if !n.cfg.Roles.Controller || !slices.ContainsFunc(n.cfg.QuorumVoters, func(v config.Voter) bool { return v.ID == n.cfg.NodeID }) {
		close(doneCh)
		return lostCh, doneCh
	}
	go func() {
		defer close(doneCh)
		tick := time.NewTicker(quorumCheckInterval)
		defer tick.Stop()
		for streak := 0; streak < quorumLostChecks; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			reason := n.quorumUnformable()
			if reason == "" {
				streak = 0
				continue
			}
			if streak++; streak == quorumLostChecks {
				lostCh <- reason
			}
		}
	}()
	return lostCh, doneCh
}

// quorumUnformable says why no controller quorum can form, or "" if one
// may: this voter follows no other voter's leadership (a leader it still
// hears from may answer; a prospective voter, KIP-996, still names the
// leader it lost), and fewer than a majority of the voters, itself
// included, accept a connection on their controller listeners.
func (n *Node) quorumUnformable() string {
	role, leader := quorum.Follower, int32(-1)
	if !n.loop.Call(func() {
		if r := n.core.QuorumRaft(); r != nil {
			role, leader = r.Role(), r.LeaderID()
		}
	}) {
		return ""
	}
	self := int32(n.cfg.NodeID)
	if role == quorum.Follower && leader >= 0 && leader != self {
		return ""
	}
	reachable := 1 // this voter
	var unreachable []string
	for _, v := range n.cfg.QuorumVoters {
		if int32(v.ID) == self {
			continue
		}
		c, err := net.DialTimeout("tcp", v.Address(), voterDialTimeout)
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("voter %d: %v", v.ID, err))
			continue
		}
		c.Close()
		reachable++
	}
	majority := len(n.cfg.QuorumVoters)/2 + 1
	if reachable >= majority {
		return ""
	}
	leads := fmt.Sprintf("no voter leads (this one is %s)", role)
	if role == quorum.Leader {
		leads = "this voter leads without a majority"
	}
	return fmt.Sprintf("%s; %d of %d voters reachable, %d needed (%s)",
		leads, reachable, len(n.cfg.QuorumVoters), majority, strings.Join(unreachable, "; "))
}

// Kill stops the node abruptly, as a crash would, without a controlled
// shutdown or closing the logs: for tests of failure handling. What the
// logs hold is what the page cache held. Fetch responses still in flight
// are not released either: a crash runs nothing more.
func (n *Node) Kill() {
	n.stop(false)
}

// stop ends the loop, the network and the disks. With runReleases, the
// releases of Fetch responses the loop did not run (posted as it stopped,
// or by connection writers it outlived) run once the network's goroutines
// have exited, before the disks close: after Close, the last release of a
// pinned segment closes its file (core/log's pin.go).
func (n *Node) stop(runReleases bool) {
	n.loop.Stop()
	n.loop.Wait()
	n.closeWaitingListeners()
	n.net.Shutdown()
	n.security.Close()
	if runReleases {
		n.loop.RunReleases()
	}
	for _, d := range n.disks {
		d.Close()
	}
	// Queued appends still reach the files; a restart in this process must
	// not find them arriving late.
	for _, d := range n.disks {
		d.Wait()
	}
	// Last: another process may use the directories from now on.
	for _, l := range n.locks {
		if err := l.Release(); err != nil {
			n.logger.Warn("cannot release the log directory's lock", "dir", l.Dir(), "err", err)
		}
	}
}

// randomID is the core's IDSource: topic and incarnation ids from
// crypto/rand.
func randomID() [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		panic(fmt.Sprintf("realnet: crypto/rand failed: %v", err))
	}
	return id
}
