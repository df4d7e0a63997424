package exporter

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryMetricIsDocumentedInCliMd: issue 18's exporter section asks
// for the metric names and labels documented in cli.md. Every descriptor
// the collector may send has a row of the metric table in docs/cli.md
// ("shmkit_ring_{pushed,popped}_total" rows expanded), each of its labels
// beyond file, kind and id is named in the row's labels column, and every
// documented metric is one the collector sends.
func TestEveryMetricIsDocumentedInCliMd(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{} // name -> the row's labels column
	row := regexp.MustCompile("^\\| `(shmkit_[a-z_{},]+)` \\| [a-z]+ \\|([^|]*)\\|")
	for _, l := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, name := range expandBraces(m[1]) {
			documented[name] = m[2]
		}
	}
	if len(documented) < 20 {
		t.Fatalf("found %d documented metrics in docs/cli.md: has the table moved?", len(documented))
	}
	re := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	sent := map[string]bool{}
	for _, d := range allDescs() {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name := m[1]
		sent[name] = true
		cell, ok := documented[name]
		if !ok {
			t.Errorf("%s is not in docs/cli.md's metric table", name)
			continue
		}
		for _, label := range strings.Split(m[2], ",") {
			if label == "" || slices.Contains(fileLabels, label) {
				continue
			}
			if !strings.Contains(cell, "`"+label+"`") {
				t.Errorf("%s: label %s is not in its row's labels column (%q)", name, label, cell)
			}
		}
	}
	for name := range documented {
		if !sent[name] {
			t.Errorf("docs/cli.md documents %s, which the collector never sends", name)
		}
	}
}

// expandBraces expands each {a,b,c} of a name: shmkit_x_{a,b}_total is
// shmkit_x_a_total and shmkit_x_b_total.
func expandBraces(s string) []string {
	i := strings.Index(s, "{")
	if i < 0 {
		return []string{s}
	}
	j := strings.Index(s[i:], "}") + i
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, expandBraces(s[:i]+alt+s[j+1:])...)
	}
	return out
}
