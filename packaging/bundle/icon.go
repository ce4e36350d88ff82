package bundle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
)

// iconSizes maps the icns element types that hold PNG data to their pixel
// size (16 pt to 512 pt at 1x and 2x).
var iconSizes = []struct {
	typ  string
	size int
}{
	{"icp4", 16}, {"icp5", 32}, {"ic11", 32}, {"ic12", 64},
	{"ic07", 128}, {"ic13", 256}, {"ic08", 256}, {"ic14", 512},
	{"ic09", 512}, {"ic10", 1024},
}

// Icon returns the app icon as .icns: drawn here rather than checked in as
// a binary, so it stays small and reviewable. A blue rounded square with a
// white ring and a play-like "go" triangle: a build that runs.
func Icon() ([]byte, error) {
	// Draw the largest size once; each smaller one averages 2x2 pixels of
	// the next larger, which also smooths the edges.
	imgs := map[int]*image.NRGBA{1024: drawIcon(1024)}
	for n := 512; n >= 16; n /= 2 {
		imgs[n] = halve(imgs[2*n])
	}
	var body bytes.Buffer
	for _, s := range iconSizes {
		var p bytes.Buffer
		if err := png.Encode(&p, imgs[s.size]); err != nil {
			return nil, fmt.Errorf("encode the %dpx icon: %w", s.size, err)
		}
		body.WriteString(s.typ)
		binary.Write(&body, binary.BigEndian, uint32(8+p.Len()))
		body.Write(p.Bytes())
	}
	var out bytes.Buffer
	out.WriteString("icns")
	binary.Write(&out, binary.BigEndian, uint32(8+body.Len()))
	out.Write(body.Bytes())
	return out.Bytes(), nil
}

// drawIcon renders n×n pixels, 2×2 samples each, for smooth edges.
func drawIcon(n int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			var r, g, b, a float64
			for _, o := range [][2]float64{{0.25, 0.25}, {0.75, 0.25}, {0.25, 0.75}, {0.75, 0.75}} {
				cr, cg, cb, ca := shade((float64(x)+o[0])/float64(n), (float64(y)+o[1])/float64(n))
				r, g, b, a = r+cr*ca, g+cg*ca, b+cb*ca, a+ca
			}
			if a > 0 {
				img.SetNRGBA(x, y, color.NRGBA{uint8(255 * r / a), uint8(255 * g / a), uint8(255 * b / a), uint8(255 * a / 4)})
			}
		}
	}
	return img
}

// halve averages each 2×2 block (weighting colour by alpha).
func halve(src *image.NRGBA) *image.NRGBA {
	n := src.Rect.Dx() / 2
	dst := image.NewNRGBA(image.Rect(0, 0, n, n))
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			var r, g, b, a int
			for _, o := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				c := src.NRGBAAt(2*x+o[0], 2*y+o[1])
				r, g, b, a = r+int(c.R)*int(c.A), g+int(c.G)*int(c.A), b+int(c.B)*int(c.A), a+int(c.A)
			}
			if a > 0 {
				dst.SetNRGBA(x, y, color.NRGBA{uint8(r / a), uint8(g / a), uint8(b / a), uint8(a / 4)})
			}
		}
	}
	return dst
}

// shade is the icon's colour at (u, v) in [0,1]², as r, g, b, alpha.
func shade(u, v float64) (r, g, b, a float64) {
	// Rounded square inset like macOS icons (about 10% margin).
	const m, rad = 0.1, 0.18
	dx := math.Max(math.Max(m+rad-u, u-(1-m-rad)), 0)
	dy := math.Max(math.Max(m+rad-v, v-(1-m-rad)), 0)
	if math.Hypot(dx, dy) > rad {
		return 0, 0, 0, 0
	}
	cx, cy := u-0.5, v-0.5
	d := math.Hypot(cx, cy)
	if d > 0.24 && d < 0.3 { // ring
		return 1, 1, 1, 1
	}
	// Triangle pointing right, centred in the ring.
	if cx > -0.09 && cx < 0.14 && math.Abs(cy) < (0.14-cx)*0.6 {
		return 1, 1, 1, 1
	}
	// Vertical gradient from light to deep blue.
	return 0.15 - 0.1*v, 0.55 - 0.25*v, 0.95 - 0.2*v, 1
}

// checkIcon verifies an .icns file: its header, every element's length,
// and that each PNG element decodes to the size its type stands for.
func checkIcon(b []byte) error {
	if len(b) < 8 || string(b[:4]) != "icns" || int(binary.BigEndian.Uint32(b[4:8])) != len(b) {
		return errors.New("not an .icns file (bad header or length)")
	}
	want := map[string]int{}
	for _, s := range iconSizes {
		want[s.typ] = s.size
	}
	seen := map[string]bool{}
	for rest := b[8:]; len(rest) > 0; {
		if len(rest) < 8 {
			return errors.New("truncated .icns element")
		}
		typ, n := string(rest[:4]), int(binary.BigEndian.Uint32(rest[4:8]))
		if n < 8 || n > len(rest) {
			return fmt.Errorf(".icns element %s has a bad length %d", typ, n)
		}
		if size, ok := want[typ]; ok {
			cfg, err := png.DecodeConfig(bytes.NewReader(rest[8:n]))
			if err != nil {
				return fmt.Errorf(".icns element %s: %w", typ, err)
			}
			if cfg.Width != size || cfg.Height != size {
				return fmt.Errorf(".icns element %s is %dx%d, want %dx%d", typ, cfg.Width, cfg.Height, size, size)
			}
			seen[typ] = true
		}
		rest = rest[n:]
	}
	for _, typ := range []string{"ic09", "ic10", "ic07"} { // Finder and the Dock need the big ones
		if !seen[typ] {
			return fmt.Errorf(".icns has no %s (%dpx) element", typ, want[typ])
		}
	}
	return nil
}
