package advisor

import (
	"testing"
	"time"
)

func TestEmbeddedHasRealFigures(t *testing.T) {
	d := Embedded()
	e, ok := d.Lookup("us-east-1", "p5.48xlarge")
	if !ok {
		t.Fatal("p5.48xlarge in us-east-1 missing from the embedded data")
	}
	// June 2025 snapshot: 52 % savings, bucket index 4 (">20%").
	if e.SavingsPct != 52 || d.Ranges[e.Range].Label != ">20%" {
		t.Fatalf("p5.48xlarge us-east-1 = %+v (%s), want s=52 r=>20%%", e, d.Ranges[e.Range].Label)
	}
	in, ok := d.Interruption("us-east-1", "p4de.24xlarge")
	if !ok || in.Bucket != "<5%" {
		t.Fatalf("p4de interruption = %+v", in)
	}
	if _, ok := d.Lookup("us-east-1", "no.such"); ok {
		t.Fatal("found an unknown type")
	}
}

func TestParseRejectsBadShapes(t *testing.T) {
	for name, in := range map[string]string{
		"not json":     `{`,
		"empty":        `{}`,
		"bad label":    `{"ranges":[{"index":0,"label":"soon","max":5}],"spot_advisor":{"r":{"Linux":{"t":{"s":1,"r":0}}}}}`,
		"range out":    `{"ranges":[{"index":0,"label":"<5%","max":5}],"spot_advisor":{"r":{"Linux":{"t":{"s":1,"r":3}}}}}`,
		"wrong type s": `{"ranges":[{"index":0,"label":"<5%","max":5}],"spot_advisor":{"r":{"Linux":{"t":{"s":"x","r":0}}}}}`,
	} {
		if _, err := Parse([]byte(in), "test", time.Time{}); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"ranges":[{"index":0,"label":"<5%","max":5}],"spot_advisor":{"r":{"Linux":{"t":{"s":1,"r":0}}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b, "fuzz", time.Time{})
		if err != nil {
			return
		}
		for region, oses := range d.Regions {
			for typ := range oses["Linux"] {
				if _, ok := d.Interruption(region, typ); !ok {
					t.Fatalf("parsed entry %s %s has no interruption", region, typ)
				}
			}
		}
	})
}
