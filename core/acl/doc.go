// Package acl is Strand's authorizer: Kafka's StandardAuthorizer semantics
// (SPEC.md §10.7) as a pure function of an ACL set, the super users, the
// allow.everyone.if.no.acl.found setting and a request's principal, host,
// operation and resource.
//
// # The rules
//
//   - A super user (super.users) is allowed everything.
//   - The ACLs that apply to a resource of type T named N are those of type
//     T whose pattern is LITERAL N, LITERAL "*", or PREFIXED P with N
//     starting with P.
//   - Of those, an ACL matches the request when its principal is the
//     request's or "User:*", its host is the request's or "*", and its
//     operation is the requested one or ALL. An ALLOW of READ, WRITE,
//     DELETE or ALTER also matches DESCRIBE, and an ALLOW of ALTER_CONFIGS
//     also matches DESCRIBE_CONFIGS; a DENY matches only its own operation
//     (or ALL).
//   - A matching DENY denies, whatever ALLOWs match. Otherwise a matching
//     ALLOW allows. Otherwise the request is denied, unless no ACL applies
//     to the resource at all: then allow.everyone.if.no.acl.found decides
//     (false by default: a resource without ACLs is closed).
//
// The reference model in reference_test.go states these rules as directly
// as they read here and is property-tested against the indexed
// implementation.
//
// # What it must not do
//
// It is part of core/: no I/O, no clock, no randomness. A Set is immutable
// once built, so one may be shared with goroutines outside the event loop
// (the produce pre-check) without a lock. Every listing is sorted: map
// order never reaches an output.
package acl
