package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSASLRequestsReachingTheCoreAreIllegal: the node advertises
// SaslHandshake v0-1 and SaslAuthenticate v0-2 (librdkafka falls back to
// pre-KIP-43 framing without them), and those that reach it — from a
// connection without SASL or already authenticated — are answered
// ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers.
func TestSASLRequestsReachingTheCoreAreIllegal(t *testing.T) {
	c := newCluster(t, 1, nil)
	api := kmsg.NewPtrApiVersionsRequest()
	api.SetVersion(3)
	got := map[int16][2]int16{}
	for _, k := range c.request(1, api).(*kmsg.ApiVersionsResponse).ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if got[17] != [2]int16{0, 1} || got[36] != [2]int16{0, 2} {
		t.Errorf("SaslHandshake %v, SaslAuthenticate %v; want [0 1] and [0 2]", got[17], got[36])
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if resp := c.request(1, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code || len(resp.SupportedMechanisms) != 0 {
		t.Errorf("SaslHandshake: error %d mechanisms %v; want ILLEGAL_SASL_STATE and none", resp.ErrorCode, resp.SupportedMechanisms)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	if resp := c.request(1, au).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code || resp.ErrorMessage == nil {
		t.Errorf("SaslAuthenticate: error %d message %v; want ILLEGAL_SASL_STATE with a message", resp.ErrorCode, resp.ErrorMessage)
	}
}
