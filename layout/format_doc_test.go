package layout

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// docs/format.md carries, for each kind, a field table generated from the
// kind's field table in this package (the one the inspectors label bytes
// with), between the markers below. This test renders every table again
// and fails when the document differs; `go test ./layout -run FormatDoc
// -update-format-doc` rewrites them.

var updateFormatDoc = flag.Bool("update-format-doc", false, "rewrite the generated field tables in docs/format.md")

const formatDoc = "../docs/format.md"

// docKinds are the geometries the tables are rendered for: each kind's
// defaults, small enough that the offsets read easily.
var docKinds = []struct {
	name string
	kind Kind
	g    Geometry
	note string
}{
	{"ring", KindRing, RingGeometry(1024, RingDefaultSlotSize, RingDefaultPeers, RingDefaultDeliveries), "capacity 1024, 64-byte slots, 64 participants"},
	{"ring-ids", KindRing, RingGeometryWith(4, RingDefaultSlotSize, 1, RingDefaultDeliveries, RingOptMessageIDs), "a ring with message ids: capacity 4, 64-byte slots, 1 participant"},
	{"deque", KindDeque, RingGeometry(1024, RingDefaultSlotSize, RingDefaultPeers, RingDefaultDeliveries), "capacity 1024, 64-byte slots, 64 participants"},
	{"hashmap", KindHashMap, HashMapGeometry(1024, 16, 32, HashMapDefaultPeers), "1024 buckets, 16-byte keys, 32-byte values, 64 participants"},
	{"heartbeat", KindHeartbeat, HeartbeatGeometry(64, 8), "64 slots, 8 leases each"},
	{"allgather", KindAllGather, AllGatherGeometry(4, 256), "4 participants, 256 words"},
	{"cancelboard", KindCancelBoard, CancelBoardGeometry(CBDefaultEntries), "256 entries"},
}

func renderFieldTable(t *testing.T, kind Kind, g Geometry, note string) string {
	t.Helper()
	spec, err := SpecOf(kind)
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := spec.Body(g)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Generated from `layout`'s field table (`go test ./layout -run FormatDoc -update-format-doc`) for %s; area offsets (file offset = header size + area offset).\n\n", note)
	b.WriteString("| area offset | size | field | meaning |\n|---:|---:|---|---|\n")
	for _, f := range m.Fields {
		fmt.Fprintf(&b, "| %d | %d | `%s` | %s |\n", f.Offset, f.Size, f.Name, escapeCell(f.Meaning))
	}
	for _, a := range m.Areas {
		fmt.Fprintf(&b, "| %d + %d·i | %d | `%s[i]` | %d records, i from 0 |\n", a.Offset, a.Stride, a.Stride, a.Name, a.Count)
		for _, f := range a.Fields {
			fmt.Fprintf(&b, "| +%d | %d | `%s[i].%s` | %s |\n", f.Offset, f.Size, a.Name, f.Name, escapeCell(f.Meaning))
		}
	}
	return b.String()
}

func renderHeaderTable() string {
	var b strings.Builder
	b.WriteString("Generated from `layout.HeaderFields` (`go test ./layout -run FormatDoc -update-format-doc`); file offsets.\n\n")
	b.WriteString("| offset | size | field | meaning |\n|---:|---:|---|---|\n")
	for _, f := range HeaderFields() {
		fmt.Fprintf(&b, "| %d | %d | `%s` | %s |\n", f.Offset, f.Size, f.Name, escapeCell(f.Meaning))
	}
	return b.String()
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func beginMarker(name string) string { return "<!-- generated: fields " + name + " -->\n" }

const endMarker = "<!-- end generated -->\n"

func TestFormatDocFieldTablesMatchLayout(t *testing.T) {
	raw, err := os.ReadFile(formatDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	want := map[string]string{"header": renderHeaderTable()}
	for _, k := range docKinds {
		want[k.name] = renderFieldTable(t, k.kind, k.g, k.note)
	}
	names := []string{"header"}
	for _, k := range docKinds {
		names = append(names, k.name)
	}
	out := doc
	for _, name := range names {
		begin := beginMarker(name)
		i := strings.Index(out, begin)
		if i < 0 {
			t.Errorf("%s: no %q marker: every kind's field table must be in the document", formatDoc, strings.TrimSpace(begin))
			continue
		}
		j := strings.Index(out[i+len(begin):], endMarker)
		if j < 0 {
			t.Errorf("%s: the %s table has no end marker", formatDoc, name)
			continue
		}
		got := out[i+len(begin) : i+len(begin)+j]
		if got != want[name] {
			if !*updateFormatDoc {
				t.Errorf("%s: the %s field table differs from layout's; run go test ./layout -run FormatDoc -update-format-doc\n--- doc\n%s--- layout\n%s", formatDoc, name, got, want[name])
			}
			out = out[:i+len(begin)] + want[name] + out[i+len(begin)+j:]
		}
	}
	if *updateFormatDoc && out != doc {
		if err := os.WriteFile(formatDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
