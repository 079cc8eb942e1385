package acl

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL requests' fields as this package's types: CreateAcls creations
// become bindings, DescribeAcls and DeleteAcls filters become filters, and
// ACLs become DescribeAcls resources and DeleteAcls matches.

// BindingOfCreation is the binding a CreateAcls creation asks for.
func BindingOfCreation(c kmsg.CreateACLsRequestCreation) Binding {
	return Binding{
		Pattern: Pattern{Type: ResourceType(c.ResourceType), Name: c.ResourceName, PatternType: PatternType(c.ResourcePatternType)},
		Entry: Entry{Principal: c.Principal, Host: c.Host, Operation: Operation(c.Operation),
			Permission: Permission(c.PermissionType)},
	}
}

// Creation is the CreateAcls creation of b.
func Creation(b Binding) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(b.Type), b.Name, kmsg.ACLResourcePatternType(b.PatternType)
	c.Principal, c.Host = b.Principal, b.Host
	c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
	return c
}

// FilterOfDescribe is a DescribeAcls request's filter.
func FilterOfDescribe(r *kmsg.DescribeACLsRequest) Filter {
	return Filter{
		Type: ResourceType(r.ResourceType), Name: r.ResourceName, PatternType: PatternType(r.ResourcePatternType),
		Principal: r.Principal, Host: r.Host, Operation: Operation(r.Operation), Permission: Permission(r.PermissionType),
	}
}

// FilterOfDelete is one DeleteAcls filter.
func FilterOfDelete(f kmsg.DeleteACLsRequestFilter) Filter {
	return Filter{
		Type: ResourceType(f.ResourceType), Name: f.ResourceName, PatternType: PatternType(f.ResourcePatternType),
		Principal: f.Principal, Host: f.Host, Operation: Operation(f.Operation), Permission: Permission(f.PermissionType),
	}
}

// DeleteFilter is the DeleteAcls filter of f.
func DeleteFilter(f Filter) kmsg.DeleteACLsRequestFilter {
	out := kmsg.NewDeleteACLsRequestFilter()
	out.ResourceType, out.ResourceName, out.ResourcePatternType = kmsg.ACLResourceType(f.Type), f.Name, kmsg.ACLResourcePatternType(f.PatternType)
	out.Principal, out.Host = f.Principal, f.Host
	out.Operation, out.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
	return out
}

// DescribeRequest is the DescribeAcls request (version 3) of f.
func DescribeRequest(f Filter) *kmsg.DescribeACLsRequest {
	r := kmsg.NewPtrDescribeACLsRequest()
	r.Version = 3
	r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(f.Type), f.Name, kmsg.ACLResourcePatternType(f.PatternType)
	r.Principal, r.Host = f.Principal, f.Host
	r.Operation, r.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
	return r
}

// ExactFilter is the filter matching exactly the binding b.
func ExactFilter(b Binding) Filter {
	name, principal, host := b.Name, b.Principal, b.Host
	return Filter{Type: b.Type, Name: &name, PatternType: b.PatternType, Principal: &principal, Host: &host,
		Operation: b.Operation, Permission: b.Permission}
}

// DescribeResources groups ACLs (sorted by Compare) into DescribeAcls
// resources, one per pattern, in the same order.
func DescribeResources(acls []ACL) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, a := range acls {
		n := len(out)
		if n == 0 || out[n-1].ResourceType != kmsg.ACLResourceType(a.Type) || out[n-1].ResourceName != a.Name ||
			out[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(a.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(a.Type), a.Name, kmsg.ACLResourcePatternType(a.PatternType)
			out = append(out, r)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = a.Principal, a.Host, kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
		out[n-1].ACLs = append(out[n-1].ACLs, e)
	}
	return out
}

// BindingsOfDescribe flattens a DescribeAcls answer's resources.
func BindingsOfDescribe(resources []kmsg.DescribeACLsResponseResource) []Binding {
	var out []Binding
	for _, r := range resources {
		for _, e := range r.ACLs {
			out = append(out, Binding{
				Pattern: Pattern{Type: ResourceType(r.ResourceType), Name: r.ResourceName, PatternType: PatternType(r.ResourcePatternType)},
				Entry:   Entry{Principal: e.Principal, Host: e.Host, Operation: Operation(e.Operation), Permission: Permission(e.PermissionType)},
			})
		}
	}
	return out
}

// DeleteMatch is the DeleteAcls match reporting a removed binding.
func DeleteMatch(b Binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.Type), b.Name, kmsg.ACLResourcePatternType(b.PatternType)
	m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
	return m
}
