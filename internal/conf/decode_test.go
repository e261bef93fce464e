package conf

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Name  string   `yaml:"name"`
	Every Duration `yaml:"every"`
	Rate  float64  `yaml:"rate_ppm"`
}

type doc struct {
	Seed  uint64      `yaml:"seed"`
	ID    uint32      `yaml:"id"`
	On    bool        `yaml:"on"`
	In    inner       `yaml:"in"`
	List  []int       `yaml:"list"`
	Pairs [][2]uint32 `yaml:"pairs"`
	Opt   *float64    `yaml:"opt"`
	Items []inner     `yaml:"items"`
	Tree  []tree      `yaml:"tree"`
}

// tree nests lists in lists, for alias bombs.
type tree struct {
	K []tree `yaml:"k"`
}

func defaults() doc {
	return doc{Seed: 1, In: inner{Name: "a", Every: Duration(time.Second)}, List: []int{9}}
}

func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		check      func(d doc) bool
	}{
		{"fields", "seed: 7\nid: 3\non: true\nin:\n  every: 250ms\nlist: [1, 2]\npairs: [[1, 2], [3, 4]]\nopt: 0.5\n",
			func(d doc) bool {
				return d.Seed == 7 && d.ID == 3 && d.On && d.In.Every == Duration(250*time.Millisecond) &&
					d.In.Name == "a" && len(d.List) == 2 && d.Pairs[1] == [2]uint32{3, 4} && *d.Opt == 0.5
			}},
		{"absent keeps defaults", "id: 2\n", func(d doc) bool { return d.Seed == 1 && d.In.Name == "a" && d.List[0] == 9 }},
		{"empty document", "# nothing\n", func(d doc) bool { return d.Seed == 1 && d.List[0] == 9 }},
		{"null empties lists, keeps the rest", "list:\nin:\nseed:\n", func(d doc) bool { return d.List == nil && d.In.Name == "a" && d.Seed == 1 }},
		{"empty list", "list: []\n", func(d doc) bool { return d.List != nil && len(d.List) == 0 }},
		{"anchor and alias", "in: &x {name: b, every: 2s}\nitems: [*x, *x]\n",
			func(d doc) bool {
				return len(d.Items) == 2 && d.Items[1].Name == "b" && d.Items[1].Every == Duration(2*time.Second)
			}},
		{"merge key", "items:\n  - &x {name: b, every: 2s, rate_ppm: 1}\n  - <<: *x\n    name: c\n",
			func(d doc) bool {
				return d.Items[1].Name == "c" && d.Items[1].Every == Duration(2*time.Second) && d.Items[1].Rate == 1
			}},
		{"merge list, first wins", "items:\n  - &x {name: x, rate_ppm: 1}\n  - &y {name: y, every: 3s}\n  - <<: [*x, *y]\n",
			func(d doc) bool {
				i := d.Items[2]
				return i.Name == "x" && i.Rate == 1 && i.Every == Duration(3*time.Second)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := defaults()
			if _, err := Unmarshal([]byte(tt.yaml), &d); err != nil {
				t.Fatal(err)
			}
			if !tt.check(d) {
				t.Errorf("decoded %+v", d)
			}
		})
	}
}

func TestDecodeErrorsNameFieldAndLine(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		field      string
		line       int
		msg        string
	}{
		{"unknown key", "in:\n  name: x\n  colour: red\n", "in.colour", 3, `unknown field "colour" (known: name, every, rate_ppm)`},
		{"twice", "seed: 1\nseed: 2\n", "seed", 2, "given twice"},
		{"bare number duration", "in:\n  every: 120\n", "in.every", 2, `duration "120": want a number with a unit`},
		{"duration a list", "in:\n  every: [1s]\n", "in.every", 2, "want a duration such as 250ms, got a sequence"},
		{"not a number", "id: one\n", "id", 1, `want a whole number in 0..4294967295, got "one"`},
		{"negative uint", "id: -1\n", "id", 1, `want a whole number in 0..4294967295, got "-1"`},
		{"section a list", "in: [1]\n", "in", 1, "want a mapping of fields, got a sequence"},
		{"list a scalar", "list: 3\n", "list", 1, "want a list, got a scalar"},
		{"pair of three", "pairs: [[1, 2, 3]]\n", "pairs[0]", 1, "want a list of 2 values"},
		{"in a list", "items:\n  - name: a\n  - nmae: b\n", "items[1].nmae", 3, "unknown field"},
		{"top a scalar", "3\n", "", 1, "want a mapping of fields"},
		{"merge of a scalar", "in:\n  <<: 3\n", "in", 2, "a merge (<<) takes a mapping"},
		{"two documents", "seed: 1\n---\nseed: 2\n", "", 2, "more than one YAML document"},
		{"syntax", "in:\n  name: [\n", "", 0, "did not find expected node content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := defaults()
			_, err := Unmarshal([]byte(tt.yaml), &d)
			fe, ok := errors.AsType[*FieldError](err)
			if !ok || !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v, want a *FieldError wrapping ErrConfig", err)
			}
			if fe.Field != tt.field || (tt.line > 0 && fe.Line != tt.line) || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("error %q: want field %q, line %d, message with %q", err, tt.field, tt.line, tt.msg)
			}
			if !strings.Contains(err.Error(), "line") {
				t.Errorf("error %q names no line", err)
			}
		})
	}
}

// bomb is a YAML alias bomb: each level a list of ten aliases to the
// level below, levels deep (10^levels values once expanded).
func bomb(levels int) string {
	var b strings.Builder
	b.WriteString("tree:\n  - &l0 {k: [{k: []}, {k: []}, {k: []}, {k: []}, {k: []}, {k: []}, {k: []}, {k: []}, {k: []}, {k: []}]}\n")
	for i := 1; i <= levels; i++ {
		a := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "  - &l%d {k: [%s]}\n", i, strings.Repeat(a+", ", 9)+a)
	}
	return b.String()
}

// TestAliasBomb: a document whose aliases expand to 10^9 values is refused
// at MaxAliasValues, naming the line of the alias that went over (a scenario
// like this one took 744 MB and 15.7 s before the cap), while a small
// expansion decodes.
func TestAliasBomb(t *testing.T) {
	var d doc
	if _, err := Unmarshal([]byte(bomb(2)), &d); err != nil {
		t.Fatalf("a 100-value expansion: %v", err)
	}
	if n := len(d.Tree[2].K[9].K); n != 10 {
		t.Fatalf("tree[2].k[9] has %d children, want 10", n)
	}
	d = doc{}
	_, err := Unmarshal([]byte(bomb(9)), &d)
	fe, ok := errors.AsType[*FieldError](err)
	if !ok || !errors.Is(err, ErrConfig) || !strings.Contains(fe.Msg, "alias") || fe.Line < 3 || !strings.HasPrefix(fe.Field, "tree[") {
		t.Fatalf("bomb: %v, want a *FieldError on an alias's line", err)
	}
}

func TestDocumentSize(t *testing.T) {
	big := "list: [" + strings.Repeat("1, ", MaxBytes/3) + "1]\n"
	var d doc
	_, err := Unmarshal([]byte(big), &d)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a %d-byte document: %v, want refused for its size", len(big), err)
	}
	if _, err := Unmarshal([]byte(big[:MaxBytes/2]+"1]\n"), &d); err != nil {
		t.Errorf("half the limit: %v", err)
	}
}

func TestAddLines(t *testing.T) {
	src := "seed: 1\nitems:\n  - name: a\n  - name: b\n    rate_ppm: 2\n"
	var d doc
	root, err := Unmarshal([]byte(src), &d)
	if err != nil {
		t.Fatal(err)
	}
	var e Errors
	e.Add("items[1].rate_ppm", "too fast")
	e.Under("items[1]")("every", "missing") // not in the file: the item's line
	e.Add("nowhere", "not in the file")
	err = e.Err()
	AddLines(err, root)
	for _, want := range []string{"line 5: items[1].rate_ppm: too fast", "line 4: items[1].every: missing", "nowhere: not in the file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if l := LineOf(root, "items[7]"); l != 0 {
		t.Errorf("LineOf(items[7]) = %d, want 0", l)
	}
}

// FuzzDecode: any input decodes or gives a *FieldError wrapping ErrConfig;
// never a panic, and never an expansion past MaxAliasValues.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"seed: 7\nin: {name: x, every: 2s}\nlist: [1, 2]\npairs: [[1, 2]]\nopt: ~\n",
		"items:\n  - &x {name: b}\n  - <<: *x\n    rate_ppm: .nan\n",
		"in: &a\n  every: 1s\nitems: [*a, *a, *a]\n",
		bomb(3),
		"seed: 18446744073709551615\nid: 4294967296\n",
		"in:\n  every: 9223372036854775807ns\n",
		"a: b\n---\nc: d\n",
		"&a [*a]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := defaults()
		_, err := Unmarshal([]byte(s), &d)
		if err == nil {
			return
		}
		if _, ok := errors.AsType[*FieldError](err); !ok || !errors.Is(err, ErrConfig) {
			t.Fatalf("error %v (%T): want a *FieldError wrapping ErrConfig", err, err)
		}
	})
}

// TestDecodeReportsEveryField: a file's bad fields come at once, each with
// its line and path, in words (issue 19: decoding stopped at the first and
// said "cannot unmarshal !!str `abc` into uint32").
func TestDecodeReportsEveryField(t *testing.T) {
	type inner struct {
		Adaptive bool    `yaml:"adaptive"`
		Ratio    float64 `yaml:"ratio"`
	}
	type cfg struct {
		ID    uint32 `yaml:"id"`
		Sync  inner  `yaml:"sync"`
		Nodes int    `yaml:"nodes"`
	}
	var c cfg
	_, err := Unmarshal([]byte("id: abc\nsync:\n  adaptive: maybe\n  ratio: lots\n  extra: 1\nnodes: 7\n"), &c)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`line 1: id: want a whole number in 0..4294967295, got "abc"`,
		`line 3: sync.adaptive: want true or false, got "maybe"`,
		`line 4: sync.ratio: want a number, got "lots"`,
		`line 5: sync.extra: unknown field "extra"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if c.Nodes != 7 {
		t.Errorf("the good fields after the bad ones: nodes %d, want 7 decoded", c.Nodes)
	}
	if strings.Contains(err.Error(), "unmarshal") || strings.Contains(err.Error(), "!!str") {
		t.Errorf("Go's or yaml's words leak: %v", err)
	}
}
