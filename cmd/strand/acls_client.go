package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
)

// aclClient is what `strand acls` asks of a cluster: Kafka's three ACL
// requests. Each create and remove is one request, which the controller
// commits as one batch (SPEC.md §10.7).
type aclClient interface {
	// describe lists the ACLs f matches (DescribeAcls), sorted.
	describe(ctx context.Context, f acl.Filter) ([]acl.Binding, error)
	// create adds bindings in one CreateAcls request.
	create(ctx context.Context, bindings []acl.Binding) error
	// remove deletes what filters match in one DeleteAcls request and
	// returns the ACLs removed, each once, sorted.
	remove(ctx context.Context, filters []acl.Filter) ([]acl.Binding, error)
}

// connectACLs connects the ACL client of a tool run; tests replace it with
// an in-memory cluster.
var connectACLs = func(cf *clientFlags) (aclClient, context.Context, func(), error) { return cf.newACLClient() }

// kgoACLClient sends the requests with a kgo client, to any broker: a
// broker forwards CreateAcls and DeleteAcls to the active controller.
type kgoACLClient struct{ cl *kgo.Client }

// requestError turns an ACL answer's error code into an error that says
// what it means for the user.
func requestError(what string, code int16, message *string) error {
	if code == 0 {
		return nil
	}
	err := kerr.ErrorForCode(code)
	switch code {
	case kerr.SecurityDisabled.Code:
		return fmt.Errorf("%s: %w: the cluster has no authorizer (set authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer)", what, err)
	case kerr.ClusterAuthorizationFailed.Code:
		return fmt.Errorf("%s: %w: this principal may not manage ACLs (CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE)", what, err)
	}
	if message != nil && *message != "" {
		return fmt.Errorf("%s: %w: %s", what, err, *message)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c kgoACLClient) describe(ctx context.Context, f acl.Filter) ([]acl.Binding, error) {
	resp, err := acl.DescribeRequest(f).RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("listing ACLs: %w", err)
	}
	if err := requestError("listing ACLs", resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	out := acl.BindingsOfDescribe(resp.Resources)
	slices.SortFunc(out, acl.Compare)
	return out, nil
}

func (c kgoACLClient) create(ctx context.Context, bindings []acl.Binding) error {
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	for _, b := range bindings {
		req.Creations = append(req.Creations, acl.Creation(b))
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("adding ACLs: %w", err)
	}
	if len(resp.Results) != len(bindings) {
		return fmt.Errorf("adding ACLs: %d answers for %d ACLs", len(resp.Results), len(bindings))
	}
	for i, r := range resp.Results {
		if err := requestError("adding "+bindings[i].String(), r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
	}
	return nil
}

func (c kgoACLClient) remove(ctx context.Context, filters []acl.Filter) ([]acl.Binding, error) {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	for _, f := range filters {
		req.Filters = append(req.Filters, acl.DeleteFilter(f))
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, fmt.Errorf("removing ACLs: %w", err)
	}
	if len(resp.Results) != len(filters) {
		return nil, fmt.Errorf("removing ACLs: %d answers for %d filters", len(resp.Results), len(filters))
	}
	var removed []acl.Binding
	for _, r := range resp.Results {
		if err := requestError("removing ACLs", r.ErrorCode, r.ErrorMessage); err != nil {
			return nil, err
		}
		for _, m := range r.MatchingACLs {
			if err := requestError("removing ACLs", m.ErrorCode, m.ErrorMessage); err != nil {
				return nil, err
			}
			removed = append(removed, acl.Binding{
				Pattern: acl.Pattern{Type: acl.ResourceType(m.ResourceType), Name: m.ResourceName, PatternType: acl.PatternType(m.ResourcePatternType)},
				Entry: acl.Entry{Principal: m.Principal, Host: m.Host, Operation: acl.Operation(m.Operation),
					Permission: acl.Permission(m.PermissionType)},
			})
		}
	}
	slices.SortFunc(removed, acl.Compare)
	return slices.Compact(removed), nil
}
