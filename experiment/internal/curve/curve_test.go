package curve

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteDrawsADecodablePNG: the file decodes as a PNG of Width x Height with both curves
// drawn (pixels of each colour present), and the same curves give the same bytes.
func TestWriteDrawsADecodablePNG(t *testing.T) {
	c := Curves{Title: "slice: training loss and dev nDCG@10", LossLabel: "training loss", DevLabel: "dev nDCG@10", BestStep: 20,
		Loss: []Point{{10, 2.1}, {20, 1.4}, {30, 1.1}, {40, 0.9}},
		Dev:  []Point{{10, 0.21}, {20, 0.34}, {30, 0.33}, {40, 0.30}}}
	path := filepath.Join(t.TempDir(), "curve.png")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != Width || r.Dy() != Height {
		t.Fatalf("PNG is %dx%d, want %dx%d", r.Dx(), r.Dy(), Width, Height)
	}
	// The loss curve (its colour exactly, away from anti-aliased edges) is drawn in the upper
	// half only, the dev curve in the lower.
	var blue, red [2]int
	for y := 0; y < Height; y++ {
		for x := 0; x < Width; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			switch {
			case r>>8 == 31 && g>>8 == 119 && b>>8 == 180:
				blue[2*y/Height]++
			case r>>8 == 214 && g>>8 == 39 && b>>8 == 40:
				red[2*y/Height]++
			}
		}
	}
	if blue[0] < 30 || blue[1] != 0 || red[1] < 30 || red[0] != 0 {
		t.Errorf("loss curve pixels (upper, lower half) %v, dev curve %v: want the loss above, the dev metric below", blue, red)
	}
	var again bytes.Buffer
	if err := Render(&again, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), b) {
		t.Error("the same curves rendered to different bytes")
	}
	// No points yet (the first evaluation before any loss line) still draws.
	if err := Write(path, Curves{Title: "empty", Dev: []Point{{5, 0.5}}}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only curve.png (no temporary file left)", len(entries))
	}
}

func TestFromLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	log := `{"phase":"pretrain","step":10,"loss":5}
{"phase":"train","step":10,"loss":2.5,"lr":0.001}
{"phase":"select","step":10,"dev/nDCG@10":0.25,"best":true}
{"phase":"train","step":20,"loss":1.5}
{"phase":"select","step":20,"dev/nDCG@10":0.125,"best":false}
{"phase":"mining","step":20,"dropped":3}
`
	os.WriteFile(path, []byte(log), 0o644)
	loss, dev, err := FromLog(path, "train", "select", "dev/nDCG@10")
	if err != nil {
		t.Fatal(err)
	}
	if len(loss) != 2 || loss[0] != (Point{10, 2.5}) || loss[1] != (Point{20, 1.5}) {
		t.Errorf("loss = %v, want [{10 2.5} {20 1.5}]", loss)
	}
	if len(dev) != 2 || dev[0] != (Point{10, 0.25}) || dev[1] != (Point{20, 0.125}) {
		t.Errorf("dev = %v, want [{10 0.25} {20 0.125}]", dev)
	}
	os.WriteFile(path, []byte(log+`{"phase":"select","step":30,"dev/nDCG@10":"x"}`+"\n"), 0o644)
	if _, _, err := FromLog(path, "train", "select", "dev/nDCG@10"); err == nil || !strings.Contains(err.Error(), "log.jsonl:7:") {
		t.Errorf("err = %v, want one naming log.jsonl:7", err)
	}
	os.WriteFile(path, []byte("{\"phase\":\n"), 0o644)
	if _, _, err := FromLog(path, "train", "select", "dev/nDCG@10"); err == nil || !strings.Contains(err.Error(), "log.jsonl:1:") {
		t.Errorf("err = %v, want one naming log.jsonl:1", err)
	}
}
