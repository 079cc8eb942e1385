package config

import (
	"strings"
	"testing"
)

// TestScramListenerSecurityResolves: a broker listener serving both SCRAM
// mechanisms, nodes connecting with one of them, takes ScramLoginModule's
// username and password for that one; without them the configuration
// parses but realnet's completeness check names the key.
func TestScramListenerSecurityResolves(t *testing.T) {
	props := securedProps(map[string]string{
		"listener.name.client.sasl.enabled.mechanisms":        "SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512",
		"listener.name.client.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"listener.name.client.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`,
	})
	b, _, err := FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	sasl := b.Security.Listeners["CLIENT"].SASL
	if got := sasl.Scram[MechanismScramSHA512]; got == nil || got.Username != "broker" || got.Password != "broker-secret" {
		t.Fatalf("SCRAM-SHA-512 settings %+v", got)
	}
	if got := sasl.Scram[MechanismScramSHA256]; got == nil || got.Username != "" {
		t.Fatalf("SCRAM-SHA-256 settings %+v", got)
	}
	if err := b.CheckAuthenticationComplete(); err != nil {
		t.Fatalf("complete configuration refused: %v", err)
	}

	props["listener.name.client.scram-sha-512.sasl.jaas.config"] = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker";`
	b, _, err = FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	err = b.CheckAuthenticationComplete()
	if err == nil || !strings.Contains(err.Error(), "listener.name.client.scram-sha-512.sasl.jaas.config") || !strings.Contains(err.Error(), "username and password") {
		t.Fatalf("a connecting node without a SCRAM password: %v", err)
	}
}
