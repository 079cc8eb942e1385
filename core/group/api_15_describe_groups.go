package group

// DescribeGroups (key 15), versions 0..6.
//
// A Stable group shows its protocol and each member's metadata and
// assignment; other states show the members without them, as Kafka does.
// An unknown group is "Dead" (v6+: with GROUP_ID_NOT_FOUND, KIP-1043).
// AuthorizedOperations stays unset: Strand has no ACLs.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeNotFoundVersion: from v6 an unknown group is an error.
const describeNotFoundVersion = 6

func (c *Coordinator) handleDescribeGroups(r *kmsg.DescribeGroupsRequest, reply func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		resp.Groups = append(resp.Groups, c.describe(id, r.Version))
	}
	reply(resp)
}

func (c *Coordinator) describe(id string, version int16) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	if code := c.availability(id); code != 0 {
		d.ErrorCode = code
		return d
	}
	g := c.groups[id]
	if g == nil || g.state == Dead {
		d.State = Dead.String()
		if version >= describeNotFoundVersion {
			d.ErrorCode = kerr.GroupIDNotFound.Code
		}
		return d
	}
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.membersInOrder() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if m.isStatic() {
			inst := m.instanceID
			dm.InstanceID = &inst
		}
		if stable {
			metadata, _ := m.metadataFor(g.protocol)
			dm.ProtocolMetadata = append([]byte{}, metadata...)
			dm.MemberAssignment = append([]byte{}, m.assignment...)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}
