package broker

// DescribeConfigs (key 32), versions 0..4.
//
// Served: TOPIC resources (the topic's overrides from the metadata image,
// with the broker's static and default values for the rest, from
// core/config) and BROKER resources naming this node (its static
// configuration, read-only). ConfigNames filters; synonyms are sent when
// asked for (v1+). An unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
//
// Skipped: another broker's configuration (ask that broker:
// INVALID_REQUEST), the cluster-wide dynamic default (BROKER with an empty
// name answers an empty list), BROKER_LOGGER and other resource types
// (INVALID_REQUEST), documentation and config types (v3).

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strand/core/config"
	"strand/core/env"
	"strand/core/metadata"
)

func (n *Node) handleDescribeConfigs(conn env.ConnID, hdr env.RequestHeader, req *kmsg.DescribeConfigsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		entries, readOnly, code := n.describeResource(res)
		rr.ErrorCode = code
		for _, e := range entries {
			if res.ConfigNames != nil && !slices.Contains(res.ConfigNames, e.Name) {
				continue
			}
			rr.Configs = append(rr.Configs, describedConfig(e, readOnly, req.IncludeSynonyms))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	n.net.Reply(conn, hdr.CorrelationID, resp)
}

// describeResource lists one resource's entries and whether they are
// read-only.
func (n *Node) describeResource(res kmsg.DescribeConfigsRequestResource) ([]config.ConfigEntry, bool, int16) {
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if _, ok := n.image.TopicByName(res.ResourceName); !ok {
			return nil, false, kerr.UnknownTopicOrPartition.Code
		}
		overrides := n.image.Configs(metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: res.ResourceName})
		if config.ValidateTopicConfig(overrides) != nil {
			overrides = nil // written by a newer Strand: show the defaults
		}
		return n.cfg.Broker.DescribeTopicConfig(overrides), false, 0
	case kmsg.ConfigResourceTypeBroker:
		switch res.ResourceName {
		case "":
			return nil, true, 0
		case strconv.Itoa(int(n.id)):
			return n.cfg.Broker.DescribeBrokerConfig(), true, 0
		}
	}
	return nil, false, kerr.InvalidRequest.Code
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
