package broker

// DescribeConfigs (key 32), versions 0..4.
//
// Served: TOPIC resources (the topic's overrides from the metadata image,
// with the broker's static and default values for the rest, from
// core/config) and BROKER resources naming this node (its static
// configuration, read-only). ConfigNames filters; synonyms are sent when
// asked for (v1+). As in Kafka's ConfigHelper, a topic name no topic can
// have is INVALID_TOPIC_EXCEPTION, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, and each INVALID_REQUEST says why in
// ErrorMessage.
//
// Skipped: another broker's configuration (ask that broker:
// INVALID_REQUEST), the cluster-wide dynamic default (BROKER with an empty
// name answers an empty list), BROKER_LOGGER and other resource types
// (INVALID_REQUEST), documentation and config types (v3).

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/acl"
	"strand/core/config"
	"strand/core/env"
	"strand/core/metadata"
)

func (mf *metadataFollower) handleDescribeConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeConfigsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	g := mf.acls.current
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		if code := g.configAccess(acl.DescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
			rr.ErrorCode = code
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		entries, readOnly, code, msg := mf.describeResource(res)
		rr.ErrorCode, rr.ErrorMessage = code, msg
		for _, e := range entries {
			if res.ConfigNames != nil && !slices.Contains(res.ConfigNames, e.Name) {
				continue
			}
			rr.Configs = append(rr.Configs, describedConfig(e, readOnly, req.IncludeSynonyms))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	mf.net.Reply(conn, hdr.CorrelationID, resp)
}

// describeResource lists one resource's entries and whether they are
// read-only, or an error code and the message explaining it (nil where
// Kafka sends none).
func (mf *metadataFollower) describeResource(res kmsg.DescribeConfigsRequestResource) ([]config.ConfigEntry, bool, int16, *string) {
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if err := metadata.ValidateTopicName(res.ResourceName); err != nil {
			return nil, false, kerr.InvalidTopicException.Code, kmsg.StringPtr(err.Error())
		}
		if _, ok := mf.image.TopicByName(res.ResourceName); !ok {
			return nil, false, kerr.UnknownTopicOrPartition.Code, nil
		}
		overrides := mf.image.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: res.ResourceName})
		if config.ValidateTopicConfig(overrides) != nil {
			overrides = nil // written by a newer Strand: show the defaults
		}
		return mf.cfg.Broker.DescribeTopicConfig(overrides), false, 0, nil
	case kmsg.ConfigResourceTypeBroker:
		switch res.ResourceName {
		case "":
			return nil, true, 0, nil
		case strconv.Itoa(int(mf.id)):
			return mf.cfg.Broker.DescribeBrokerConfig(), true, 0, nil
		}
		if _, err := strconv.ParseInt(res.ResourceName, 10, 32); err != nil {
			return nil, false, kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("broker resource name %q: must be a broker id (an integer) or empty", res.ResourceName))
		}
		return nil, false, kerr.InvalidRequest.Code,
			kmsg.StringPtr(fmt.Sprintf("broker resource name %q: this is broker %d; ask broker %s for its configuration, or name \"\" for the cluster default", res.ResourceName, mf.id, res.ResourceName))
	}
	return nil, false, kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("resource type %v: only TOPIC and BROKER are served", res.ResourceType))
}

func describedConfig(e config.ConfigEntry, readOnly, synonyms bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source, c.ReadOnly = e.Name, e.Value, e.Source, readOnly
	c.IsDefault = e.Source == kmsg.ConfigSourceDefaultConfig
	if synonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = s.Name, s.Value, s.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
