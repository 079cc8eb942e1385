package realnet

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/broker"
	"strand/core/config"
	"strand/core/metadata"
	"strand/core/wire"
)

// Forged control-plane requests against a real node, each contained
// (SPEC.md §10): the control plane belongs to the controller listener.

// exchange sends req on a fresh connection to addr and returns its answer,
// or nil once the broker closes the connection without one.
func exchange(t *testing.T, addr net.Addr, req kmsg.Request) kmsg.Response {
	t.Helper()
	r := dialRaw(t, addr)
	r.send(1, req)
	frame, err := r.readFrame(10 * time.Second)
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			t.Fatalf("%s: neither answered nor closed after 10 s", kmsg.NameForKey(req.Key()))
		}
		return nil
	}
	_, resp, err := wire.ParseResponse(frame, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// brokerImage runs fn on node n's applied metadata.
func brokerImage(n *Node, fn func(*metadata.Image)) {
	n.Call(func(b *broker.Node) { fn(b.Image()) })
}

// TestFakeBrokerCannotRegisterOnTheClientPort: two fake brokers'
// anonymous BrokerRegistration and BrokerHeartbeat on the client port
// would, if served, lead most partitions of a topic created next. The
// client port closes the connection: no broker is registered, and every
// partition is led by a real broker.
func TestFakeBrokerCannotRegisterOnTheClientPort(t *testing.T) {
	c := startCluster(t, 3, nil)
	addr := c.nodes[0].Addr("PLAINTEXT")
	for _, fake := range []int32{100, 101} {
		reg := kmsg.NewPtrBrokerRegistrationRequest()
		reg.SetVersion(3)
		reg.BrokerID, reg.IncarnationID = fake, [16]byte{0xfa, 0x4e, byte(fake)}
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 1
		reg.Listeners = append(reg.Listeners, l)
		resp := exchange(t, addr, reg)
		if resp == nil {
			continue
		}
		t.Errorf("fake broker %d's registration was answered: %+v", fake, resp)
		// Try the attack in full: unfence it.
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.SetVersion(1)
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = fake, resp.(*kmsg.BrokerRegistrationResponse).BrokerEpoch, 1<<40
		exchange(t, addr, hb)
		exchange(t, addr, hb)
	}
	const topic = "after-fakes"
	c.createTopic(topic, 6, 1)
	leaders := c.leaders(topic, 6)
	brokerImage(c.nodes[0], func(im *metadata.Image) {
		for _, id := range im.BrokerIDs() {
			if id > 3 {
				t.Errorf("broker %d is registered", id)
			}
		}
	})
	for p, l := range leaders {
		if l < 1 || l > 3 {
			t.Errorf("partition %d is led by broker %d", p, l)
		}
	}
}

// TestForgedShutdownHeartbeatOnTheClientPortChangesNothing: one anonymous
// heartbeat with WantShutdown, sent to the client port in a real broker's
// name with its epoch, put it into controlled shutdown for good. Now the
// connection closes and the broker keeps its leaderships.
func TestForgedShutdownHeartbeatOnTheClientPortChangesNothing(t *testing.T) {
	c := startCluster(t, 2, nil)
	const topic = "stays-up"
	c.createTopic(topic, 2, 2)
	var epoch int64
	brokerImage(c.nodes[0], func(im *metadata.Image) {
		b, _ := im.Broker(2)
		epoch = b.Epoch
	})
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.SetVersion(1)
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset, hb.WantShutdown = 2, epoch, 1<<40, true
	for _, n := range c.nodes {
		if resp := exchange(t, n.Addr("PLAINTEXT"), hb); resp != nil {
			t.Errorf("the forged heartbeat was answered: %+v", resp)
		}
	}
	time.Sleep(time.Second) // a controlled shutdown would have moved leadership by now
	brokerImage(c.nodes[0], func(im *metadata.Image) {
		if b, _ := im.Broker(2); b.InControlledShutdown || b.Fenced {
			t.Errorf("broker 2 after the forged heartbeat: %+v", b)
		}
	})
	for p, l := range c.leaders(topic, 2) {
		if l < 0 {
			t.Errorf("partition %d has no leader", p)
		}
	}
	produceKeyed(t, c.client(), topic, 10)
}

// TestProduceOnTheControllerPortIsNotAppended: a Produce sent to the
// controller port was appended. Now the connection closes and the
// partition's first record, produced afterwards on the client port, gets
// offset 0.
func TestProduceOnTheControllerPortIsNotAppended(t *testing.T) {
	c := startCluster(t, 1, nil)
	const topic = "client-port-only"
	c.createTopic(topic, 1, 1)
	if resp := exchange(t, c.nodes[0].Addr("CONTROLLER"), rawProduce(topic, 0, 1, "forged")); resp != nil {
		t.Errorf("the Produce on the controller port was answered: %+v", resp)
	}
	cl := c.client(kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := cl.ProduceSync(ctx, kgo.StringRecord("real")).First()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Offset != 0 {
		t.Errorf("the first record produced on the client port has offset %d, want 0: the forged one was appended", rec.Offset)
	}
}

// TestApiVersionsPerListenerOverTCP: the client port advertises no
// controller API and the controller port no client API, in the answer to
// ApiVersions and in KIP-511's answer to an unsupported one (realnet's own).
func TestApiVersionsPerListenerOverTCP(t *testing.T) {
	c := startCluster(t, 1, nil)
	controllerOnly := []kmsg.Key{kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AlterPartition, kmsg.AllocateProducerIDs,
		kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.FetchSnapshot}
	clientOnly := []kmsg.Key{kmsg.Produce, kmsg.Metadata, kmsg.ListOffsets, kmsg.FindCoordinator, kmsg.InitProducerID}
	unsupported := binary.BigEndian.AppendUint16(nil, 18)
	unsupported = binary.BigEndian.AppendUint16(unsupported, 99)
	unsupported = append(binary.BigEndian.AppendUint32(unsupported, 1), 0, 3, 'r', 'a', 'w', 0, 0, 0)
	for _, tc := range []struct {
		listener      string
		absent, shown []kmsg.Key
	}{
		{"PLAINTEXT", controllerOnly, clientOnly},
		{"CONTROLLER", clientOnly, controllerOnly},
	} {
		addr := c.nodes[0].Addr(tc.listener)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		kip511 := dialRaw(t, addr)
		kip511.write(frameOf(unsupported))
		for _, resp := range []*kmsg.ApiVersionsResponse{exchange(t, addr, req).(*kmsg.ApiVersionsResponse),
			kip511.receive(1, req).(*kmsg.ApiVersionsResponse)} {
			keys := map[int16]bool{}
			for _, k := range resp.ApiKeys {
				keys[k.ApiKey] = true
			}
			for _, k := range tc.absent {
				if keys[k.Int16()] {
					t.Errorf("%s (ApiVersions error %d) advertises %v", tc.listener, resp.ErrorCode, k)
				}
			}
			for _, k := range tc.shown {
				if !keys[k.Int16()] {
					t.Errorf("%s (ApiVersions error %d) does not advertise %v", tc.listener, resp.ErrorCode, k)
				}
			}
		}
	}
}

// TestSecuredListenerWithoutCredentialsRefusesTheStart: realnet serves
// every protocol (SPEC.md §10.6), but a secured listener without what its
// handshakes need (a certificate, a JAAS configuration) refuses the start,
// naming the missing key, rather than serving the operator's secured port
// without them.
func TestSecuredListenerWithoutCredentialsRefusesTheStart(t *testing.T) {
	for protocol, missing := range map[string]string{
		"SSL":            "listener.name.controller.ssl.keystore.location",
		"SASL_PLAINTEXT": "listener.name.controller.gssapi.sasl.jaas.config",
		"SASL_SSL":       "listener.name.controller.ssl.keystore.location",
	} {
		cfg, _, err := config.FromProperties(map[string]string{
			"node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
			"listeners":                      "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:" + protocol,
			"controller.quorum.voters":       "1@127.0.0.1:9093", "log.dirs": t.TempDir(), "super.users": "User:broker",
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := Start(Options{Config: cfg, Logger: testLogger(t, 1)})
		if err == nil {
			n.Kill()
			t.Fatalf("%s controller listener without credentials: the node started", protocol)
		}
		if !strings.Contains(err.Error(), "config key "+missing) {
			t.Errorf("%s: %v, want it to name %s", protocol, err, missing)
		}
	}
}
