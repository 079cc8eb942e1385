package realnet

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeGroupsShowsTheMembersClientHost: a member that joined over
// TCP from 127.0.0.1 is described with ClientHost "/127.0.0.1", as Kafka
// shows it (the HOST column of kafka-consumer-groups): the request header
// carries the peer address.
func TestDescribeGroupsShowsTheMembersClientHost(t *testing.T) {
	c := startCluster(t, 1, map[string]string{"offsets.topic.replication.factor": "1"})
	c.waitRegistered(1)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const group = "client-host-group"
	var memberID string // set by MEMBER_ID_REQUIRED, then kept (KIP-394)
	c.waitFor("the member joins", 25*time.Second, func() bool {
		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.MemberID = group, memberID
		join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
		join.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
		join.Protocols = append(join.Protocols, p)
		joinCtx, joinCancel := context.WithTimeout(ctx, 8*time.Second)
		defer joinCancel()
		resp, err := join.RequestWith(joinCtx, cl)
		if err == nil && resp.ErrorCode == kerr.MemberIDRequired.Code {
			memberID = resp.MemberID
			return false
		}
		if err != nil || resp.ErrorCode != 0 {
			return false // the coordinator may still be loading
		}
		memberID = resp.MemberID
		return true
	})
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{group}
	resp, err := describe.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	if len(resp.Groups) != 1 || len(resp.Groups[0].Members) != 1 {
		t.Fatalf("DescribeGroups answered %+v, want one group with one member", resp.Groups)
	}
	m := resp.Groups[0].Members[0]
	if m.MemberID != memberID || m.ClientHost != "/127.0.0.1" {
		t.Fatalf("member %q described with client host %q, want member %q from \"/127.0.0.1\"", m.MemberID, m.ClientHost, memberID)
	}
}

func TestClientHostOf(t *testing.T) {
	cases := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, "/127.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 5000}, "/::1"},
		{nil, ""},
	}
	for _, c := range cases {
		if got := clientHostOf(c.addr); got != c.want {
			t.Errorf("clientHostOf(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}
