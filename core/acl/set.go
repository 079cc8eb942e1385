package acl

import (
	"bytes"
	"slices"
)

// Set is an immutable set of ACLs, indexed for authorization: the ACLs
// that apply to a resource are found with one lookup per distinct prefix
// length, not by scanning. Build one with NewSet; never modify it after.
// A nil *Set is the empty set.
type Set struct {
	// acls are sorted by Compare, then ID.
	acls   []ACL
	byType map[ResourceType]*typeIndex
}

// typeIndex holds the ACLs of one resource type.
type typeIndex struct {
	// literal maps a LITERAL name ("*" included) to its ACLs.
	literal map[string][]ACL
	// prefixed maps a PREFIXED name to its ACLs.
	prefixed map[string][]ACL
	// prefixLengths are the distinct lengths of the prefixed names,
	// ascending: a resource name's candidate prefixes.
	prefixLengths []int
}

// NewSet indexes acls. It copies what it keeps.
func NewSet(acls []ACL) *Set {
	s := &Set{acls: slices.Clone(acls), byType: map[ResourceType]*typeIndex{}}
	slices.SortFunc(s.acls, func(a, b ACL) int {
		if c := Compare(a.Binding, b.Binding); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	for _, a := range s.acls {
		idx := s.byType[a.Type]
		if idx == nil {
			idx = &typeIndex{literal: map[string][]ACL{}, prefixed: map[string][]ACL{}}
			s.byType[a.Type] = idx
		}
		switch a.PatternType {
		case Literal:
			idx.literal[a.Name] = append(idx.literal[a.Name], a)
		case Prefixed:
			if len(idx.prefixed[a.Name]) == 0 {
				idx.prefixLengths = append(idx.prefixLengths, len(a.Name))
			}
			idx.prefixed[a.Name] = append(idx.prefixed[a.Name], a)
		}
	}
	for _, idx := range s.byType { // order-independent: sorts each index's own slice
		slices.Sort(idx.prefixLengths)
		idx.prefixLengths = slices.Compact(idx.prefixLengths)
	}
	return s
}

// Len is the number of ACLs.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.acls)
}

// All returns every ACL, sorted by binding. Callers must not modify it.
func (s *Set) All() []ACL {
	if s == nil {
		return nil
	}
	return s.acls
}

// Select returns the ACLs f matches, sorted by binding.
func (s *Set) Select(f Filter) []ACL {
	var out []ACL
	for _, a := range s.All() {
		if f.Matches(a.Binding) {
			out = append(out, a)
		}
	}
	return out
}

// applicable calls fn with each ACL that applies to the resource of type t
// named name (LITERAL name, LITERAL "*", PREFIXED prefixes of name) until
// fn returns false. overmatch, a planted bug, also takes PREFIXED patterns
// that name is a proper prefix of (a prefix matching a shorter name).
func (s *Set) applicable(t ResourceType, name string, overmatch bool, fn func(ACL) bool) {
	if s == nil {
		return
	}
	idx := s.byType[t]
	if idx == nil {
		return
	}
	for _, a := range idx.literal[name] {
		if !fn(a) {
			return
		}
	}
	if name != Wildcard {
		for _, a := range idx.literal[Wildcard] {
			if !fn(a) {
				return
			}
		}
	}
	for _, l := range idx.prefixLengths {
		if l > len(name) {
			break
		}
		for _, a := range idx.prefixed[name[:l]] {
			if !fn(a) {
				return
			}
		}
	}
	if overmatch {
		for _, a := range s.acls {
			if a.Type == t && a.PatternType == Prefixed && len(a.Name) > len(name) && a.Name[:len(name)] == name {
				if !fn(a) {
					return
				}
			}
		}
	}
}
