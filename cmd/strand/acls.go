package main

// `strand acls`, after kafka-acls.sh (--add, --remove, --list with its
// resource, principal, host and operation flags and its --producer and
// --consumer shorthands), and the design's verbs over the same requests
// (acls_design.go). Every change one invocation makes is sent as one
// CreateAcls and/or one DeleteAcls request, which the controller commits
// as one batch each (SPEC.md §10.7).

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"strand/core/acl"
)

const aclsUsage = `usage: strand acls (--add | --remove | --list) [resources] [principals] [flags]
       strand acls <grant|revoke|reset|check> USER PERMS TOPIC [flags]
       strand acls apply --file F [flags]

kafka-acls.sh's form:
  --add | --remove | --list
  resources (repeatable): --topic T, --group G, --cluster, --transactional-id X,
                          --delegation-token D, --user-principal P
  --resource-pattern-type literal|prefixed (add) or any|match too (remove, list); default literal
  --allow-principal P, --deny-principal P (repeatable, e.g. User:alice or User:*)
  --allow-host H, --deny-host H (repeatable; default * for every host)
  --operation OP (repeatable: Read, Write, Create, Delete, Alter, Describe, ClusterAction,
                  DescribeConfigs, AlterConfigs, IdempotentWrite, All; default All)
  --producer     WRITE, DESCRIBE and CREATE on the topics (and --idempotent: IDEMPOTENT_WRITE on the cluster)
  --consumer     READ and DESCRIBE on the topics, READ on the groups
  --principal P  (--list) only the ACLs of P
  --force        (--remove) do not ask for confirmation

The design's verbs, on LITERAL topic ACLs from every host:
  grant USER PERMS TOPIC    allow USER the operations PERMS, letters of RWCD
                            (Read, Write, Create, Delete) on TOPIC
  revoke USER PERMS TOPIC   remove those ALLOWs
  reset USER PERMS TOPIC    make USER's RWCD on TOPIC exactly PERMS (- for none)
  check USER PERMS TOPIC    yes (exit 0) if the ACLs allow USER every operation in PERMS
                            on TOPIC, no (exit 1); --host H checks from H (default: only
                            ACLs for every host count). Super users and
                            allow.everyone.if.no.acl.found are the brokers' settings,
                            which the check cannot see.
  apply --file F            the grant, revoke and reset lines of F (# comments), committed
                            together

USER is a principal (User:jack) or a bare name (jack means User:jack).
Every form takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092), --timeout and
--command-config FILE (the client's security settings, as Kafka's tools take them).
`

// acls is `strand acls`.
func acls(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, aclsUsage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(stdout, aclsUsage)
		return 0
	}
	verb, rest := designVerbOf(args)
	switch verb {
	case "grant", "revoke", "reset", "apply":
		return finish("acls "+verb, stderr, runDesignVerb(verb, rest, stdout, stderr))
	case "check":
		return checkStatus(stderr, aclsCheck(rest, stdout, stderr))
	}
	return finish("acls", stderr, aclsKafkaForm(args, stdin, stdout, stderr))
}

// designVerbs are the design's shorthands, written first or after the
// client flags every form takes (strand acls --bootstrap-server H grant ...).
var designVerbs = map[string]bool{"grant": true, "revoke": true, "reset": true, "apply": true, "check": true}

// designVerbOf finds the design verb of args and the arguments it takes,
// the client flags written before it included; "" when args are
// kafka-acls.sh's form.
func designVerbOf(args []string) (verb string, rest []string) {
	if designVerbs[args[0]] {
		return args[0], args[1:]
	}
	flags := flag.NewFlagSet("acls", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	addClientFlags(flags)
	if flags.Parse(args) != nil || flags.NArg() == 0 || !designVerbs[flags.Arg(0)] {
		return "", nil
	}
	before := args[:len(args)-flags.NArg()]
	return flags.Arg(0), append(append([]string{}, before...), flags.Args()[1:]...)
}

// kafkaACLFlags are kafka-acls.sh's options.
type kafkaACLFlags struct {
	add, remove, list, cluster, producer, consumer, idempotent, force  bool
	topics, groups, transactionalIDs, delegationTokens, userPrincipals stringList
	patternType                                                        string
	allowPrincipals, denyPrincipals, allowHosts, denyHosts, operations stringList
	listPrincipals                                                     stringList
}

func (k *kafkaACLFlags) register(flags *flag.FlagSet) {
	flags.BoolVar(&k.add, "add", false, "add ACLs")
	flags.BoolVar(&k.remove, "remove", false, "remove ACLs")
	flags.BoolVar(&k.list, "list", false, "list ACLs")
	flags.Var(&k.topics, "topic", "a topic (repeatable; * for every topic)")
	flags.Var(&k.groups, "group", "a consumer group (repeatable; * for every group)")
	flags.BoolVar(&k.cluster, "cluster", false, "the cluster")
	flags.Var(&k.transactionalIDs, "transactional-id", "a transactional id (repeatable)")
	flags.Var(&k.delegationTokens, "delegation-token", "a delegation token (repeatable)")
	flags.Var(&k.userPrincipals, "user-principal", "a user principal as a resource (repeatable)")
	flags.StringVar(&k.patternType, "resource-pattern-type", "literal", "literal, prefixed, any or match")
	flags.Var(&k.allowPrincipals, "allow-principal", "a principal to allow (repeatable)")
	flags.Var(&k.denyPrincipals, "deny-principal", "a principal to deny (repeatable)")
	flags.Var(&k.allowHosts, "allow-host", "a host the allowed principals may come from (repeatable; default *)")
	flags.Var(&k.denyHosts, "deny-host", "a host the denied principals are denied from (repeatable; default *)")
	flags.Var(&k.operations, "operation", "an operation (repeatable; default All)")
	flags.BoolVar(&k.producer, "producer", false, "the producer's ACLs: WRITE, DESCRIBE, CREATE on the topics")
	flags.BoolVar(&k.consumer, "consumer", false, "the consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups")
	flags.BoolVar(&k.idempotent, "idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	flags.Var(&k.listPrincipals, "principal", "with --list: only this principal's ACLs (repeatable)")
	flags.BoolVar(&k.force, "force", false, "with --remove: do not ask for confirmation")
}

// resourceACLs are the entries a command names for one resource pattern
// (a filter's pattern when removing or listing).
type resourceACLs struct {
	pattern acl.Pattern
	entries []acl.Entry
}

func aclsKafkaForm(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	flags := newFlagSet("acls", stderr)
	cf := addClientFlags(flags)
	var k kafkaACLFlags
	k.register(flags)
	if err := parseNoPositional(flags, args); err != nil {
		return err
	}
	actions := 0
	for _, on := range []bool{k.add, k.remove, k.list} {
		if on {
			actions++
		}
	}
	if actions != 1 {
		return usageErrorf("give exactly one of --add, --remove, --list")
	}
	patternType, err := acl.ParsePatternType(k.patternType)
	if err != nil {
		return usageErrorf("--resource-pattern-type: %v", err)
	}
	if k.add && patternType != acl.Literal && patternType != acl.Prefixed {
		return usageErrorf("a '--resource-pattern-type' value of '%v' is not valid when adding acls", patternType)
	}
	if k.idempotent && !k.producer {
		return usageErrorf("--idempotent goes with --producer")
	}
	if (k.producer || k.consumer) && k.list {
		return usageErrorf("--producer and --consumer go with --add or --remove")
	}
	client, ctx, done, err := connectACLs(cf)
	if err != nil {
		return err
	}
	defer done()
	switch {
	case k.list:
		return aclsList(ctx, client, k, patternType, stdout)
	case k.add:
		plan, err := k.plan(patternType, true)
		if err != nil {
			return err
		}
		return aclsAdd(ctx, client, plan, stdout)
	}
	plan, err := k.plan(patternType, true)
	if err != nil {
		return err
	}
	return aclsRemove(ctx, client, plan, k.force, stdin, stdout)
}

// resources are the patterns the resource flags name, in flag order.
func (k *kafkaACLFlags) resources(patternType acl.PatternType) []acl.Pattern {
	var out []acl.Pattern
	add := func(t acl.ResourceType, names []string) {
		for _, n := range names {
			out = append(out, acl.Pattern{Type: t, Name: strings.TrimSpace(n), PatternType: patternType})
		}
	}
	add(acl.Topic, k.topics)
	if patternType == acl.Literal && (k.cluster || k.idempotent) {
		out = append(out, acl.Pattern{Type: acl.Cluster, Name: acl.ClusterName, PatternType: acl.Literal})
	}
	add(acl.Group, k.groups)
	add(acl.TransactionalID, k.transactionalIDs)
	add(acl.DelegationToken, k.delegationTokens)
	add(acl.User, k.userPrincipals)
	return out
}

// entries are the ACL entries for ops: each allowed principal from each
// allowed host, then each denied one from each denied host.
func (k *kafkaACLFlags) entries(ops []acl.Operation) ([]acl.Entry, error) {
	var out []acl.Entry
	add := func(principals, hosts []string, permission acl.Permission) error {
		if len(hosts) == 0 {
			hosts = []string{acl.Wildcard}
		}
		for _, p := range principals {
			p = strings.TrimSpace(p)
			if err := acl.ValidatePrincipal(p); err != nil {
				return usageErrorf("%v", err)
			}
			for _, op := range ops {
				for _, h := range hosts {
					out = append(out, acl.Entry{Principal: p, Host: strings.TrimSpace(h), Operation: op, Permission: permission})
				}
			}
		}
		return nil
	}
	if err := add(k.allowPrincipals, k.allowHosts, acl.Allow); err != nil {
		return nil, err
	}
	if err := add(k.denyPrincipals, k.denyHosts, acl.Deny); err != nil {
		return nil, err
	}
	return out, nil
}

// plan is what --add or --remove names, resource by resource, as
// kafka-acls.sh builds it: the --operation ACLs on every resource, or the
// --producer and --consumer sets.
func (k *kafkaACLFlags) plan(patternType acl.PatternType, needResource bool) ([]resourceACLs, error) {
	resources := k.resources(patternType)
	if len(resources) == 0 && needResource {
		return nil, usageErrorf("you must provide at least one resource: --topic <topic> or --cluster or --group <group> or --transactional-id <id>")
	}
	var plan []resourceACLs
	if !k.producer && !k.consumer {
		var ops []acl.Operation
		names := k.operations
		if len(names) == 0 {
			names = []string{"All"}
		}
		for _, name := range names {
			op, err := acl.ParseOperation(strings.TrimSpace(name))
			if err != nil || op == acl.AnyOperation {
				return nil, usageErrorf("--operation %s: not an operation", name)
			}
			ops = append(ops, op)
		}
		entries, err := k.entries(ops)
		if err != nil {
			return nil, err
		}
		for _, r := range resources {
			plan = append(plan, resourceACLs{r, entries})
		}
	}
	if k.producer || k.consumer {
		if err := k.rolePlan(resources, &plan); err != nil {
			return nil, err
		}
	}
	for _, r := range plan {
		supported := acl.SupportedOperations(r.pattern.Type)
		for _, e := range r.entries {
			if !slices.Contains(supported, e.Operation) {
				return nil, usageErrorf("ResourceType %v only supports operations %v", r.pattern.Type, supported)
			}
		}
	}
	if k.add {
		for _, r := range plan {
			if len(r.entries) == 0 {
				return nil, usageErrorf("you must specify one of: --allow-principal, --deny-principal when trying to add ACLs")
			}
		}
	}
	return plan, nil
}

// rolePlan adds the --producer and --consumer ACLs.
func (k *kafkaACLFlags) rolePlan(resources []acl.Pattern, plan *[]resourceACLs) error {
	addFor := func(t acl.ResourceType, ops ...acl.Operation) error {
		entries, err := k.entries(ops)
		if err != nil {
			return err
		}
		for _, r := range resources {
			if r.Type != t {
				continue
			}
			i := slices.IndexFunc(*plan, func(p resourceACLs) bool { return p.pattern == r })
			if i < 0 {
				*plan = append(*plan, resourceACLs{pattern: r})
				i = len(*plan) - 1
			}
			for _, e := range entries {
				if !slices.Contains((*plan)[i].entries, e) {
					(*plan)[i].entries = append((*plan)[i].entries, e)
				}
			}
		}
		return nil
	}
	if k.producer {
		if err := addFor(acl.Topic, acl.Write, acl.Describe, acl.Create); err != nil {
			return err
		}
		if err := addFor(acl.TransactionalID, acl.Write, acl.Describe); err != nil {
			return err
		}
		if k.idempotent {
			if err := addFor(acl.Cluster, acl.IdempotentWrite); err != nil {
				return err
			}
		}
	}
	if k.consumer {
		if err := addFor(acl.Topic, acl.Read, acl.Describe); err != nil {
			return err
		}
		return addFor(acl.Group, acl.Read)
	}
	return nil
}

// aclsAdd adds the plan's ACLs in one CreateAcls request, after saying
// which exist already, as kafka-acls.sh does.
func aclsAdd(ctx context.Context, client aclClient, plan []resourceACLs, stdout io.Writer) error {
	var creations []acl.Binding
	for _, r := range plan {
		existing, err := client.describe(ctx, patternFilter(r.pattern))
		if err != nil {
			return err
		}
		var adding []acl.Entry
		for _, e := range r.entries {
			b := acl.Binding{Pattern: r.pattern, Entry: e}
			if slices.Contains(existing, b) {
				fmt.Fprintf(stdout, "Acl %v already exists.\n", b)
				continue
			}
			adding = append(adding, e)
			creations = append(creations, b)
		}
		if len(adding) > 0 {
			fmt.Fprintf(stdout, "Adding ACLs for resource `%v`: \n %s\n\n", r.pattern, entryLines(adding))
		}
	}
	if len(creations) == 0 {
		return nil
	}
	return client.create(ctx, creations)
}

// aclsRemove removes the plan's ACLs (every ACL of a resource filter that
// names no entry) in one DeleteAcls request, after confirmation.
func aclsRemove(ctx context.Context, client aclClient, plan []resourceACLs, force bool, stdin io.Reader, stdout io.Writer) error {
	var filters []acl.Filter
	var question strings.Builder
	for _, r := range plan {
		base := patternFilter(r.pattern)
		if len(r.entries) == 0 {
			fmt.Fprintf(&question, "Are you sure you want to delete all ACLs for resource filter `%s`? (y/n)\n", filterString(base))
			filters = append(filters, base)
			continue
		}
		fmt.Fprintf(&question, "Are you sure you want to remove ACLs: \n %s\n from resource filter `%s`? (y/n)\n", entryLines(r.entries), filterString(base))
		for _, e := range r.entries {
			f := base
			principal, host := e.Principal, e.Host
			f.Principal, f.Host, f.Operation, f.Permission = &principal, &host, e.Operation, e.Permission
			filters = append(filters, f)
		}
	}
	if !force {
		fmt.Fprint(stdout, question.String())
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if !strings.EqualFold(strings.TrimSpace(answer), "y") {
			fmt.Fprintln(stdout, "Nothing removed.")
			return nil
		}
	}
	removed, err := client.remove(ctx, filters)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Removed %d ACLs.\n", len(removed))
	return nil
}

// aclsList prints the ACLs the resource flags select (every ACL without
// one) as kafka-acls.sh does: one paragraph per resource pattern.
func aclsList(ctx context.Context, client aclClient, k kafkaACLFlags, patternType acl.PatternType, stdout io.Writer) error {
	var found []acl.Binding
	resources := k.resources(patternType)
	if len(resources) == 0 {
		all, err := client.describe(ctx, acl.MatchAll)
		if err != nil {
			return err
		}
		found = all
	}
	for _, r := range resources {
		some, err := client.describe(ctx, patternFilter(r))
		if err != nil {
			return err
		}
		found = append(found, some...)
	}
	slices.SortFunc(found, acl.Compare)
	found = slices.Compact(found)
	if len(k.listPrincipals) == 0 {
		printResourceACLs(stdout, found)
		return nil
	}
	for _, p := range k.listPrincipals {
		fmt.Fprintf(stdout, "ACLs for principal `%s`\n", p)
		printResourceACLs(stdout, slices.DeleteFunc(slices.Clone(found), func(b acl.Binding) bool { return b.Principal != p }))
	}
	return nil
}

// printResourceACLs prints sorted bindings grouped by pattern, in
// kafka-acls.sh's words.
func printResourceACLs(w io.Writer, bindings []acl.Binding) {
	for i := 0; i < len(bindings); {
		j := i
		var entries []acl.Entry
		for ; j < len(bindings) && bindings[j].Pattern == bindings[i].Pattern; j++ {
			entries = append(entries, bindings[j].Entry)
		}
		fmt.Fprintf(w, "Current ACLs for resource `%v`:\n%s\n\n", bindings[i].Pattern, entryLines(entries))
		i = j
	}
}

// entryLines renders entries one per line, each after a tab.
func entryLines(entries []acl.Entry) string {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = "\t" + e.String()
	}
	return strings.Join(lines, "\n")
}

// patternFilter selects the ACLs of a pattern given as a filter: its name
// with its pattern type, which may be ANY or MATCH when removing or
// listing.
func patternFilter(p acl.Pattern) acl.Filter {
	name := p.Name
	return acl.Filter{Type: p.Type, Name: &name, PatternType: p.PatternType, Operation: acl.AnyOperation, Permission: acl.AnyPermission}
}

// filterString renders a resource filter as Kafka's ResourcePatternFilter.
func filterString(f acl.Filter) string {
	name := "<any>"
	if f.Name != nil {
		name = *f.Name
	}
	return fmt.Sprintf("ResourcePattern(resourceType=%v, name=%s, patternType=%v)", f.Type, name, f.PatternType)
}
