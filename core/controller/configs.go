package controller

// AlterConfigs (key 33) and IncrementalAlterConfigs (key 44), as Kafka's
// ConfigurationControlManager serves them.
//
// Served: TOPIC resources. Each resource is decided on its own: its new
// override set is computed from the latest image, validated whole by
// core/config (an unknown key or a bad value is INVALID_CONFIG naming the
// key), and the keys whose value changes become ConfigRecords, all
// resources of one request in one batch, answered once it commits.
// ValidateOnly answers without appending. Brokers apply the records from
// the metadata log like any other.
//
// Skipped: dynamic broker configs. A BROKER resource is INVALID_REQUEST
// (Kafka's answer to a key that cannot be updated dynamically: Strand's
// broker keys are all read-only, set in server.properties); any other
// resource type is INVALID_REQUEST too.

import (
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/metadata"
)

// listTopicKeys are the topic keys of Kafka type LIST, the only ones APPEND
// and SUBTRACT apply to, with Kafka's default: the value an APPEND or
// SUBTRACT starts from when the topic has no override (Kafka's
// ConfigurationControlManager takes the schema default, not the broker's).
var listTopicKeys = map[string]string{
	"cleanup.policy":                          "delete",
	"leader.replication.throttled.replicas":   "",
	"follower.replication.throttled.replicas": "",
}

// handleAlterConfigs replaces each named topic's whole override set with
// the request's (legacy AlterConfigs: keys left out are removed).
func (c *Controller) handleAlterConfigs(req *kmsg.AlterConfigsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	seen := map[kmsg.ConfigResourceType]map[string]int{}
	for _, r := range req.Resources {
		countResource(seen, r.ResourceType, r.ResourceName)
	}
	t := c.beginIfActive()
	for _, r := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = r.ResourceType, r.ResourceName
		err := c.checkResource(t, seen, r.ResourceType, r.ResourceName)
		if err == nil {
			err = c.alterResource(t, req.ValidateOnly, r.ResourceName, func(current map[string]string) (map[string]string, *apiError) {
				return replacedConfigs(r.Configs)
			})
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, &err.message
		}
		resp.Resources = append(resp.Resources, out)
	}
	c.commitOrReply(t, req, resp, reply)
}

// handleIncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT to
// each named topic's overrides (KIP-339).
func (c *Controller) handleIncrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	seen := map[kmsg.ConfigResourceType]map[string]int{}
	for _, r := range req.Resources {
		countResource(seen, r.ResourceType, r.ResourceName)
	}
	t := c.beginIfActive()
	for _, r := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = r.ResourceType, r.ResourceName
		err := c.checkResource(t, seen, r.ResourceType, r.ResourceName)
		if err == nil {
			err = c.alterResource(t, req.ValidateOnly, r.ResourceName, func(current map[string]string) (map[string]string, *apiError) {
				return incrementedConfigs(current, r.Configs)
			})
		}
		if err != nil {
			out.ErrorCode, out.ErrorMessage = err.code, &err.message
		}
		resp.Resources = append(resp.Resources, out)
	}
	c.commitOrReply(t, req, resp, reply)
}

func countResource(seen map[kmsg.ConfigResourceType]map[string]int, typ kmsg.ConfigResourceType, name string) {
	if seen[typ] == nil {
		seen[typ] = map[string]int{}
	}
	seen[typ][name]++
}

// beginIfActive starts a decision, or returns nil when this controller is
// not active (every resource is then answered NOT_CONTROLLER).
func (c *Controller) beginIfActive() *txn {
	if c.Active() {
		return c.begin()
	}
	return nil
}

// commitOrReply answers at once when not active, else once the decision's
// records commit.
func (c *Controller) commitOrReply(t *txn, req kmsg.Request, resp kmsg.Response, reply func(kmsg.Response)) {
	if t == nil {
		reply(resp)
		return
	}
	t.commit(func() { reply(resp) }, notController(req, reply))
}

// checkResource answers what does not depend on the requested keys: this
// controller's role, the resource type, duplicates, and the topic's
// existence.
func (c *Controller) checkResource(t *txn, seen map[kmsg.ConfigResourceType]map[string]int, typ kmsg.ConfigResourceType, name string) *apiError {
	switch {
	case t == nil:
		return &apiError{code: codeNotController}
	case typ == kmsg.ConfigResourceTypeBroker:
		return errorf(kerr.InvalidRequest, "broker %q: broker configs cannot be updated dynamically in Strand; set them in server.properties", name)
	case typ != kmsg.ConfigResourceTypeTopic:
		return errorf(kerr.InvalidRequest, "resource type %v: only TOPIC configs can be altered", typ)
	case seen[typ][name] > 1:
		return errorf(kerr.InvalidRequest, "topic %q appears more than once in the request", name)
	case name == "":
		// Kafka's ConfigAdminManager: topic configs have no cluster-wide
		// default resource (unlike broker configs).
		return errorf(kerr.InvalidRequest, "Default topic resources are not allowed.")
	}
	if err := metadata.ValidateTopicName(name); err != nil {
		return errorf(kerr.InvalidTopicException, "%v", err)
	}
	if _, ok := c.latest.TopicByName(name); !ok {
		return errorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return nil
}

// alterResource computes a topic's new overrides with next, validates
// them, and (unless validateOnly) adds a ConfigRecord per key whose value
// changes, in key order.
func (c *Controller) alterResource(t *txn, validateOnly bool, topic string, next func(current map[string]string) (map[string]string, *apiError)) *apiError {
	res := metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}
	current := c.latest.Configs(res)
	updated, err := next(current)
	if err != nil {
		return err
	}
	if err := validateTopicOverrides(topic, updated); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	keys := map[string]bool{}
	for key := range maps.Keys(current) { // order-independent: a set, sorted below
		keys[key] = true
	}
	for key := range maps.Keys(updated) { // order-independent: a set, sorted below
		keys[key] = true
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		oldValue, had := current[key]
		newValue, has := updated[key]
		switch {
		case has && (!had || oldValue != newValue):
			t.add(&metadata.ConfigRecord{ResourceType: res.Type, ResourceName: topic, Name: key, Value: &newValue})
		case had && !has:
			t.add(&metadata.ConfigRecord{ResourceType: res.Type, ResourceName: topic, Name: key})
		}
	}
	return nil
}

// validateTopicOverrides checks a topic's whole override set with
// core/config, as brokers will resolve it: an unknown key or a bad value is
// INVALID_CONFIG naming the key (CreateTopics and both AlterConfigs).
func validateTopicOverrides(topic string, overrides map[string]string) *apiError {
	if err := config.ValidateTopicConfig(overrides); err != nil {
		return errorf(kerr.InvalidConfig, "topic %q: %v", topic, err)
	}
	return nil
}

// replacedConfigs is the override set of a legacy AlterConfigs resource:
// exactly the keys it names.
func replacedConfigs(configs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, *apiError) {
	out := map[string]string{}
	for _, kv := range configs {
		if kv.Name == "" {
			return nil, errorf(kerr.InvalidConfig, "empty config name")
		}
		if kv.Value == nil {
			return nil, errorf(kerr.InvalidConfig, "config %q: null values are not supported for topic configs", kv.Name)
		}
		if _, dup := out[kv.Name]; dup {
			return nil, errorf(kerr.InvalidRequest, "config %q appears more than once", kv.Name)
		}
		out[kv.Name] = *kv.Value
	}
	return out, nil
}

// incrementedConfigs applies incremental operations to a copy of current.
func incrementedConfigs(current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, *apiError) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Name == "" {
			return nil, errorf(kerr.InvalidConfig, "empty config name")
		}
		if seen[op.Name] {
			return nil, errorf(kerr.InvalidRequest, "config %q appears more than once", op.Name)
		}
		seen[op.Name] = true
		if err := applyIncrementalOp(out, op); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// applyIncrementalOp applies one operation to configs.
func applyIncrementalOp(configs map[string]string, op kmsg.IncrementalAlterConfigsRequestResourceConfig) *apiError {
	switch op.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		if op.Value == nil {
			return errorf(kerr.InvalidConfig, "config %q: SET needs a value (DELETE removes a key)", op.Name)
		}
		configs[op.Name] = *op.Value
	case kmsg.IncrementalAlterConfigOpDelete:
		delete(configs, op.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		def, isList := listTopicKeys[op.Name]
		if !isList {
			return errorf(kerr.InvalidConfig, "config %q: cannot %v because its type is not LIST", op.Name, op.Op)
		}
		if op.Value == nil {
			return errorf(kerr.InvalidConfig, "config %q: %v needs a value", op.Name, op.Op)
		}
		base, ok := configs[op.Name]
		if !ok {
			base = def
		}
		items := listItems(base)
		for _, item := range listItems(*op.Value) {
			if op.Op == kmsg.IncrementalAlterConfigOpAppend && !slices.Contains(items, item) {
				items = append(items, item)
			}
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				items = slices.DeleteFunc(items, func(s string) bool { return s == item })
			}
		}
		configs[op.Name] = strings.Join(items, ",")
	default:
		return errorf(kerr.InvalidRequest, "config %q: unknown operation %d (want SET 0, DELETE 1, APPEND 2 or SUBTRACT 3)", op.Name, op.Op)
	}
	return nil
}

// listItems splits a LIST value at commas, trimming blanks and dropping
// empty items, as Kafka parses LIST configs.
func listItems(value string) []string {
	var items []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// configsErrorResponse answers AlterConfigs and IncrementalAlterConfigs
// with code for every resource (ErrorResponse's part for these keys).
func configsErrorResponse(req kmsg.Request, code int16) (kmsg.Response, bool) {
	switch r := req.(type) {
	case *kmsg.AlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, res := range r.Resources {
			out := kmsg.NewAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = res.ResourceType, res.ResourceName, code
			resp.Resources = append(resp.Resources, out)
		}
		return resp, true
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range r.Resources {
			out := kmsg.NewIncrementalAlterConfigsResponseResource()
			out.ResourceType, out.ResourceName, out.ErrorCode = res.ResourceType, res.ResourceName, code
			resp.Resources = append(resp.Resources, out)
		}
		return resp, true
	}
	return nil, false
}

// configMap turns CreateTopics' sorted, duplicate-free entries into a map.
func configMap(entries []configEntry) map[string]string {
	out := make(map[string]string, len(entries))
	for _, kv := range entries {
		out[kv.key] = kv.value
	}
	return out
}
