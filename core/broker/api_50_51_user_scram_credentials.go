package broker

// DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
// (key 51), versions 0..0 of each, as Kafka serves them (KIP-554), and the
// SCRAM credentials this node hands its environment (SPEC.md §10.6).
//
// Describe is answered from the metadata this broker has applied, as
// Kafka's brokers answer it from their metadata cache: every user with a
// credential when the request names none (sorted by name), else each named
// user in the request's order, with the mechanisms and iteration counts of
// its credentials (never a salt or a key). A user named twice is
// DUPLICATE_RESOURCE, one without a credential RESOURCE_NOT_FOUND, with
// Kafka's messages.
//
// Alter is decided by the controller (core/controller/scram.go): any
// broker accepts it and forwards it to the active controller
// (controller_role.go), as CreateTopics. The new credentials reach every
// broker through the metadata log; a broker authenticates with a changed
// credential once it has applied its record.
//
// As in Kafka, Describe requires DESCRIBE on the cluster and Alter ALTER
// on the cluster (authorize_apis.go): with the authorizer on, anyone else
// is answered CLUSTER_AUTHORIZATION_FAILED before anything is read or
// forwarded.
//
// Skipped: nothing of v0.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/env"
	"strand/core/metadata"
)

func (mf *metadataFollower) handleDescribeUserScramCredentials(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeUserSCRAMCredentialsRequest) {
	mf.net.Reply(conn, hdr.CorrelationID, describeScramCredentials(mf.image.ScramCredentials(), req))
}

// describeScramCredentials answers req from creds.
func describeScramCredentials(creds *metadata.ScramCredentials, req *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	byName := map[string][]metadata.ScramUser{}
	var names []string // every user with a credential, sorted
	for _, u := range creds.Users() {
		if len(byName[u.Name]) == 0 {
			names = append(names, u.Name)
		}
		byName[u.Name] = append(byName[u.Name], u)
	}
	times := map[string]int{}
	if len(req.Users) > 0 {
		names = nil
		for _, u := range req.Users {
			if times[u.Name]++; times[u.Name] == 1 {
				names = append(names, u.Name)
			}
		}
	}
	for _, name := range names {
		out := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		out.User = name
		switch {
		case times[name] > 1:
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + name
			out.ErrorCode, out.ErrorMessage = kerr.DuplicateResource.Code, &msg
		case len(byName[name]) == 0:
			msg := "Attempt to describe a user credential that does not exist: " + name
			out.ErrorCode, out.ErrorMessage = kerr.ResourceNotFound.Code, &msg
		default:
			for _, u := range byName[name] {
				c, _ := creds.Credential(u)
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = int8(u.Mechanism), c.Iterations
				out.CredentialInfos = append(out.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, out)
	}
	return resp
}

// publishScramCredentials hands the environment the SCRAM credentials of
// the image when they changed since it last did, after every metadata
// apply (reconcilePartitions). The set is immutable (metadata's records
// replace it), so the environment's connection goroutines read it while
// the loop applies more.
func (mf *metadataFollower) publishScramCredentials() {
	creds := mf.image.ScramCredentials()
	if creds == mf.scramPublished {
		return
	}
	mf.scramPublished = creds
	mf.net.SetScramCredentials(creds)
}
