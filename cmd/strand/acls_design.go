package main

// The design's verbs (its AuthorizationManager: grant, revoke,
// resetPermission, isPermitted, commit) as shorthands over Kafka's ACL
// requests. A user's permissions on a topic are the design's
// /acl/<topic>/<user> node: letters of RWCD, each a LITERAL ALLOW of READ,
// WRITE, CREATE or DELETE on the topic from every host.
//
// A change is at most two requests: the removals in one DeleteAcls, then
// the additions in one CreateAcls, each committed as one batch. Removing
// first means no client ever sees a set of permissions larger than both
// the old and the new one (SPEC.md §10.7).

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"strand/core/acl"
)

// designPerm is one of the design's permission letters and its operation.
type designPerm struct {
	letter byte
	op     acl.Operation
}

// designPerms are the design's permissions: Read, Write, Create, Delete.
var designPerms = []designPerm{{'R', acl.Read}, {'W', acl.Write}, {'C', acl.Create}, {'D', acl.Delete}}

// parsePerms reads PERMS: letters of RWCD in any order and case, each at
// most once; "-" (or empty, for reset) is none.
func parsePerms(perms string, allowNone bool) ([]acl.Operation, error) {
	if perms == "-" || perms == "" {
		if allowNone {
			return nil, nil
		}
		return nil, usageErrorf("PERMS is empty: give letters of RWCD (Read, Write, Create, Delete)")
	}
	var ops []acl.Operation
	for _, c := range []byte(strings.ToUpper(perms)) {
		i := slices.IndexFunc(designPerms, func(p designPerm) bool { return p.letter == c })
		if i < 0 {
			return nil, usageErrorf("PERMS %q: %q is not one of R, W, C, D", perms, c)
		}
		if slices.Contains(ops, designPerms[i].op) {
			return nil, usageErrorf("PERMS %q names %c twice", perms, c)
		}
		ops = append(ops, designPerms[i].op)
	}
	slices.Sort(ops)
	return ops, nil
}

// userPrincipal is USER as a principal: User:<name> unless it has a type.
func userPrincipal(user string) (string, error) {
	user = strings.TrimSpace(user)
	if !strings.Contains(user, ":") {
		user = "User:" + user
	}
	if err := acl.ValidatePrincipal(user); err != nil {
		return "", usageErrorf("USER: %v", err)
	}
	return user, nil
}

// designChange is one line of the design's verbs: who, what, which topic.
type designChange struct {
	verb      string
	principal string
	ops       []acl.Operation
	topic     string
}

func parseDesignChange(verb string, args []string) (designChange, error) {
	if len(args) != 3 {
		return designChange{}, usageErrorf("%s takes USER PERMS TOPIC", verb)
	}
	principal, err := userPrincipal(args[0])
	if err != nil {
		return designChange{}, err
	}
	ops, err := parsePerms(args[1], verb == "reset")
	if err != nil {
		return designChange{}, err
	}
	if strings.TrimSpace(args[2]) == "" {
		return designChange{}, usageErrorf("TOPIC is empty")
	}
	return designChange{verb: verb, principal: principal, ops: ops, topic: strings.TrimSpace(args[2])}, nil
}

// designACL is the ACL one permission letter stands for.
func designACL(principal, topic string, op acl.Operation) acl.Binding {
	return acl.Binding{
		Pattern: acl.Pattern{Type: acl.Topic, Name: topic, PatternType: acl.Literal},
		Entry:   acl.Entry{Principal: principal, Host: acl.Wildcard, Operation: op, Permission: acl.Allow},
	}
}

// designKey is one user on one topic: a /acl/<topic>/<user> node.
type designKey struct{ principal, topic string }

// designPlan is the net effect of changes on the design's nodes: what to
// remove (every host's ALLOW of the letter's operation) and what to add.
type designPlan struct {
	removals  []acl.Filter
	additions []acl.Binding
}

// planDesignChanges applies changes in order to the nodes they touch,
// starting from current (each node's operations as the cluster holds them
// now), and returns the requests that take the cluster there.
func planDesignChanges(changes []designChange, current map[designKey][]acl.Operation) designPlan {
	var keys []designKey
	next := map[designKey][]acl.Operation{}
	for _, c := range changes {
		k := designKey{c.principal, c.topic}
		if _, seen := next[k]; !seen {
			keys = append(keys, k)
			next[k] = slices.Clone(current[k])
		}
		switch c.verb {
		case "grant":
			for _, op := range c.ops {
				if !slices.Contains(next[k], op) {
					next[k] = append(next[k], op)
				}
			}
		case "revoke":
			next[k] = slices.DeleteFunc(next[k], func(op acl.Operation) bool { return slices.Contains(c.ops, op) })
		case "reset":
			next[k] = slices.Clone(c.ops)
		}
	}
	var plan designPlan
	for _, k := range keys {
		for _, p := range designPerms {
			had, has := slices.Contains(current[k], p.op), slices.Contains(next[k], p.op)
			switch {
			case had && !has:
				f := acl.ExactFilter(designACL(k.principal, k.topic, p.op))
				f.Host = nil // from every host it was granted from
				plan.removals = append(plan.removals, f)
			case !had && has:
				plan.additions = append(plan.additions, designACL(k.principal, k.topic, p.op))
			}
		}
	}
	return plan
}

// currentDesignPerms reads the RWCD operations each (user, topic) of
// changes holds now: its LITERAL ALLOWs of READ, WRITE, CREATE and DELETE
// on the topic, from any host.
func currentDesignPerms(ctx context.Context, client aclClient, changes []designChange) (map[designKey][]acl.Operation, error) {
	current := map[designKey][]acl.Operation{}
	var topics []string
	for _, c := range changes {
		if !slices.Contains(topics, c.topic) {
			topics = append(topics, c.topic)
		}
	}
	for _, topic := range topics {
		name := topic
		held, err := client.describe(ctx, acl.Filter{Type: acl.Topic, Name: &name, PatternType: acl.Literal,
			Operation: acl.AnyOperation, Permission: acl.Allow})
		if err != nil {
			return nil, err
		}
		for _, b := range held {
			k := designKey{b.Principal, b.Name}
			isDesign := slices.ContainsFunc(designPerms, func(p designPerm) bool { return p.op == b.Operation })
			if isDesign && !slices.Contains(current[k], b.Operation) {
				current[k] = append(current[k], b.Operation)
			}
		}
	}
	return current, nil
}

// commitDesignPlan sends the removals, then the additions, and says what
// changed.
func commitDesignPlan(ctx context.Context, client aclClient, plan designPlan, stdout io.Writer) error {
	if len(plan.removals) == 0 && len(plan.additions) == 0 {
		fmt.Fprintln(stdout, "Nothing to change.")
		return nil
	}
	if len(plan.removals) > 0 {
		removed, err := client.remove(ctx, plan.removals)
		if err != nil {
			return err
		}
		for _, b := range removed {
			fmt.Fprintf(stdout, "revoked %v from %s on topic %s (host %s)\n", b.Operation, b.Principal, b.Name, b.Host)
		}
	}
	if len(plan.additions) > 0 {
		if err := client.create(ctx, plan.additions); err != nil {
			return err
		}
		for _, b := range plan.additions {
			fmt.Fprintf(stdout, "granted %v to %s on topic %s\n", b.Operation, b.Principal, b.Name)
		}
	}
	return nil
}

// runDesignVerb runs grant, revoke, reset or apply.
func runDesignVerb(verb string, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("acls "+verb, stderr)
	cf := addClientFlags(flags)
	file := flags.String("file", "", "apply: the file of grant, revoke and reset lines")
	positional, err := parseInterspersed(flags, args)
	if err != nil {
		return &usageError{err.Error()}
	}
	var changes []designChange
	if verb == "apply" {
		if *file == "" || len(positional) > 0 {
			return usageErrorf("apply takes --file F and nothing else")
		}
		if changes, err = readDesignFile(*file); err != nil {
			return err
		}
	} else {
		if *file != "" {
			return usageErrorf("--file goes with apply")
		}
		c, err := parseDesignChange(verb, positional)
		if err != nil {
			return err
		}
		changes = []designChange{c}
	}
	client, ctx, done, err := connectACLs(cf)
	if err != nil {
		return err
	}
	defer done()
	current, err := currentDesignPerms(ctx, client, changes)
	if err != nil {
		return err
	}
	return commitDesignPlan(ctx, client, planDesignChanges(changes, current), stdout)
}

// readDesignFile reads apply's file: one `grant|revoke|reset USER PERMS
// TOPIC` per line; blank lines and lines starting with # are skipped.
func readDesignFile(path string) ([]designChange, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the changes: %w", err)
	}
	defer f.Close()
	return parseDesignLines(f, path)
}

func parseDesignLines(r io.Reader, name string) ([]designChange, error) {
	var changes []designChange
	scanner := bufio.NewScanner(r)
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		verb := fields[0]
		if verb != "grant" && verb != "revoke" && verb != "reset" {
			return nil, usageErrorf("%s:%d: %q is not grant, revoke or reset", name, line, verb)
		}
		c, err := parseDesignChange(verb, fields[1:])
		if err != nil {
			return nil, usageErrorf("%s:%d: %v", name, line, err)
		}
		changes = append(changes, c)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(changes) == 0 {
		return nil, usageErrorf("%s holds no change", name)
	}
	return changes, nil
}

// checkUnanswered is the exit status of a check that could not answer
// (unreachable cluster, ACLs not readable): neither yes (0) nor no (1).
const checkUnanswered = 3

// checkStatus is `acls check`'s exit status: 0 yes, 1 no (errNo), 2 a
// usage mistake, 3 no answer.
func checkStatus(stderr io.Writer, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNo):
		return 1
	}
	if status := finish("acls check", stderr, err); status == 2 {
		return 2
	}
	return checkUnanswered
}

// errNo is a check answered no.
var errNo = errors.New("no")

// aclsCheck answers whether USER may do every PERMS operation on TOPIC,
// from the ACLs that apply to the topic (DescribeAcls with a MATCH filter)
// and the authorizer's own rules (core/acl): DENY wins, User:* and host *
// match, PREFIXED and * patterns apply.
func aclsCheck(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("acls check", stderr)
	cf := addClientFlags(flags)
	host := flags.String("host", acl.Wildcard, "the client's address to check from (default: only ACLs for every host count)")
	positional, err := parseInterspersed(flags, args)
	if err != nil {
		return &usageError{err.Error()}
	}
	c, err := parseDesignChange("check", positional)
	if err != nil {
		return err
	}
	client, ctx, done, err := connectACLs(cf)
	if err != nil {
		return err
	}
	defer done()
	answers, err := checkDesign(ctx, client, c, *host)
	if err != nil {
		return err
	}
	all := true
	var parts []string
	for _, a := range answers {
		word := "yes"
		if !a.Allowed {
			word, all = "no", false
		}
		parts = append(parts, fmt.Sprintf("%v %s (%s)", a.op, word, checkReason(a.Decision)))
	}
	if all {
		fmt.Fprintln(stdout, "yes")
	} else {
		fmt.Fprintln(stdout, "no")
	}
	fmt.Fprintf(stdout, "%s on topic %s: %s\n", c.principal, c.topic, strings.Join(parts, ", "))
	if !all {
		return errNo
	}
	return nil
}

// checkReason says why the ACLs decided as they did.
func checkReason(d acl.Decision) string {
	switch d.Rule {
	case acl.RuleMatchingACL:
		b := d.ACL
		return fmt.Sprintf("%v %v for %s from %s on %v %v %s", b.Permission, b.Operation, b.Principal, b.Host,
			strings.ToLower(b.PatternType.String()), strings.ToLower(b.Type.String()), b.Name)
	case acl.RuleNoACLFound:
		return "no ACL on the topic"
	}
	return "no ACL allows it"
}

// checkAnswer is the verdict on one operation.
type checkAnswer struct {
	op acl.Operation
	acl.Decision
}

// checkDesign decides each operation of c from the ACLs that apply to the
// topic, as a broker with no super users and
// allow.everyone.if.no.acl.found=false would.
func checkDesign(ctx context.Context, client aclClient, c designChange, host string) ([]checkAnswer, error) {
	name := c.topic
	applicable, err := client.describe(ctx, acl.Filter{Type: acl.Topic, Name: &name, PatternType: acl.Match,
		Operation: acl.AnyOperation, Permission: acl.AnyPermission})
	if err != nil {
		return nil, err
	}
	held := make([]acl.ACL, len(applicable))
	for i, b := range applicable {
		held[i].Binding = b
		binary.BigEndian.PutUint64(held[i].ID[8:], uint64(i)+1) // ids need only be distinct here
	}
	authorizer := acl.New(acl.Config{}, acl.NewSet(held))
	who := acl.Requester{Principal: c.principal, Host: host}
	var answers []checkAnswer
	for _, op := range c.ops {
		answers = append(answers, checkAnswer{op, authorizer.Authorize(who, acl.Action{Operation: op, Type: acl.Topic, Name: c.topic})})
	}
	return answers, nil
}
