package plan

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Plot geometry, in pixels.
const (
	plotW, plotH                  = 1400, 900
	marginL, marginR              = 175, 40
	marginT, marginB              = 110, 110
	textScale                     = 2 // basicfont's 7x13 glyphs, drawn twice as large
	lineWidth                     = 3.5
	plotMinLen, plotMaxLen        = 1 << 10, 1 << 20
	plotSamples                   = 400
	glyphW, glyphH, glyphAscent   = 7, 13, 11
	legendPad, legendRow, legendW = 14, 32, 50
)

// palette is the line colours, one per model (repeating after ten).
func palette(i int) color.RGBA {
	p := [...]color.RGBA{
		{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {255, 127, 14, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
		{188, 189, 34, 255}, {23, 190, 207, 255},
	}
	return p[i%len(p)]
}

// Plot draws the exact per-request memory, Bytes(L), of each model against
// the context length L as a PNG: L on a log scale from 1K to 1M tokens,
// memory on a log scale in 1024-based units, one line per model ending at its
// MaxContext (marked with a dot when that is below 1M), with a legend, axis
// labels and gridlines. models must not be empty.
func Plot(w io.Writer, models []Model) error {
	if len(models) == 0 {
		return fmt.Errorf("plan: plot of no models")
	}
	type series struct {
		x, y []float64 // log2 tokens, log2 bytes
		end  bool      // stops at MaxContext below plotMaxLen
	}
	var all []series
	yMin, yMax := math.Inf(1), math.Inf(-1)
	for _, m := range models {
		last := min(m.MaxContext, plotMaxLen)
		if last < plotMinLen {
			return fmt.Errorf("plan: plot: %s supports only %d tokens, below the plot's %d", m.Name, m.MaxContext, plotMinLen)
		}
		var s series
		lo, hi := math.Log2(plotMinLen), math.Log2(float64(last))
		for i := 0; i <= plotSamples; i++ {
			n := int(math.Round(math.Exp2(lo + (hi-lo)*float64(i)/plotSamples)))
			n = min(max(n, plotMinLen), last)
			b := m.Bytes(n)
			if b <= 0 {
				return fmt.Errorf("plan: plot: %s holds no bytes at %d tokens", m.Name, n)
			}
			y := math.Log2(float64(b))
			s.x = append(s.x, math.Log2(float64(n)))
			s.y = append(s.y, y)
			yMin, yMax = math.Min(yMin, y), math.Max(yMax, y)
		}
		s.end = last < plotMaxLen
		all = append(all, s)
	}
	// Y range: whole powers of two around the data, at least a factor of 16,
	// starting at an even power so labelled ticks fall on 1, 4, 16, ... units.
	y0 := math.Floor(yMin)
	if int(y0)%2 != 0 {
		y0--
	}
	y1 := math.Max(math.Ceil(yMax+0.25), y0+4)
	if int(y1)%2 != 0 {
		y1++
	}
	x0, x1 := math.Log2(plotMinLen), math.Log2(plotMaxLen)

	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	left, right, top, bottom := marginL, plotW-marginR, marginT, plotH-marginB
	px := func(x float64) float64 { return float64(left) + (x-x0)/(x1-x0)*float64(right-left) }
	py := func(y float64) float64 { return float64(bottom) - (y-y0)/(y1-y0)*float64(bottom-top) }

	minor := color.RGBA{235, 235, 235, 255}
	major := color.RGBA{205, 205, 205, 255}
	ink := color.RGBA{30, 30, 30, 255}
	// Gridlines and tick labels: every power of two on both axes, labels on
	// every x power and on even y powers (or every y power when the range is
	// small).
	for e := x0; e <= x1; e++ {
		x := int(math.Round(px(e)))
		fillRect(img, x, top, x+1, bottom, major)
		drawText(img, x, bottom+12, ShortLength(1<<int(e)), ink, 0.5, 0)
	}
	every := 2.0
	if y1-y0 <= 8 {
		every = 1
	}
	for e := y0; e <= y1; e++ {
		y := int(math.Round(py(e)))
		labelled := math.Mod(e-y0, every) == 0
		c := minor
		if labelled {
			c = major
		}
		fillRect(img, left, y, right, y+1, c)
		if labelled {
			drawText(img, left-10, y, byteLabel(e), ink, 1, 0.5)
		}
	}
	// Frame.
	fillRect(img, left, top, right+1, top+1, ink)
	fillRect(img, left, bottom, right+1, bottom+1, ink)
	fillRect(img, left, top, left+1, bottom+1, ink)
	fillRect(img, right, top, right+1, bottom+1, ink)

	// Lines.
	cov := make([]float32, plotW*plotH)
	for i, s := range all {
		clear(cov)
		for j := 1; j < len(s.x); j++ {
			stroke(cov, px(s.x[j-1]), py(s.y[j-1]), px(s.x[j]), py(s.y[j]), lineWidth)
		}
		if s.end {
			k := len(s.x) - 1
			stroke(cov, px(s.x[k]), py(s.y[k]), px(s.x[k]), py(s.y[k]), 4*lineWidth)
		}
		composite(img, cov, palette(i))
	}

	// Titles and axis labels.
	drawText(img, plotW/2, 22, "Per-request cache memory vs context length", ink, 0.5, 0)
	drawText(img, plotW/2, 58, "exact slot counts (KV, indexer keys, windows, recurrent state); dot = max context", color.RGBA{90, 90, 90, 255}, 0.5, 0)
	drawText(img, (left+right)/2, bottom+52, "context length (tokens, log scale; K = 1024)", ink, 0.5, 0)
	drawTextVertical(img, 22, (top+bottom)/2, "memory per request (log scale; 1 GB = 2^30 bytes)", ink)

	// Legend, top left inside the plot.
	lw := 0
	for _, m := range models {
		lw = max(lw, len(legendLabel(m))*glyphW*textScale)
	}
	lx, ly := left+20, top+20
	box := image.Rect(lx, ly, lx+2*legendPad+legendW+10+lw, ly+2*legendPad+legendRow*len(models)-6)
	draw.Draw(img, box, image.White, image.Point{}, draw.Src)
	fillRect(img, box.Min.X, box.Min.Y, box.Max.X, box.Min.Y+1, major)
	fillRect(img, box.Min.X, box.Max.Y-1, box.Max.X, box.Max.Y, major)
	fillRect(img, box.Min.X, box.Min.Y, box.Min.X+1, box.Max.Y, major)
	fillRect(img, box.Max.X-1, box.Min.Y, box.Max.X, box.Max.Y, major)
	for i, m := range models {
		cy := ly + legendPad + i*legendRow + glyphH*textScale/2
		clear(cov)
		stroke(cov, float64(lx+legendPad), float64(cy), float64(lx+legendPad+legendW), float64(cy), lineWidth)
		composite(img, cov, palette(i))
		drawText(img, lx+legendPad+legendW+10, ly+legendPad+i*legendRow, legendLabel(m), ink, 0, 0)
	}
	return png.Encode(w, img)
}

// legendLabel names a model in the legend, with its maximum context when
// the line stops short of the plot's right edge.
func legendLabel(m Model) string {
	if m.MaxContext < plotMaxLen {
		return fmt.Sprintf("%s (max %s)", m.Name, ShortLength(m.MaxContext))
	}
	return m.Name
}

// byteLabel names 2^e bytes in the handbook's 1024-based units.
func byteLabel(e float64) string {
	n := int(e)
	switch {
	case n >= 30:
		return fmt.Sprintf("%d GB", 1<<(n-30))
	case n >= 20:
		return fmt.Sprintf("%d MB", 1<<(n-20))
	case n >= 10:
		return fmt.Sprintf("%d KB", 1<<(n-10))
	}
	return fmt.Sprintf("%d B", 1<<max(n, 0))
}

// fillRect paints [x0,x1)x[y0,y1) with c.
func fillRect(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// stroke raises cov to the anti-aliased coverage of a segment of the given
// width with round ends (a disc when the ends coincide).
func stroke(cov []float32, ax, ay, bx, by, width float64) {
	r := width / 2
	minX := int(math.Floor(math.Min(ax, bx) - r - 1))
	maxX := int(math.Ceil(math.Max(ax, bx) + r + 1))
	minY := int(math.Floor(math.Min(ay, by) - r - 1))
	maxY := int(math.Ceil(math.Max(ay, by) + r + 1))
	dx, dy := bx-ax, by-ay
	l2 := dx*dx + dy*dy
	for y := max(minY, 0); y <= min(maxY, plotH-1); y++ {
		for x := max(minX, 0); x <= min(maxX, plotW-1); x++ {
			cx, cy := float64(x)+0.5, float64(y)+0.5
			t := 0.0
			if l2 > 0 {
				t = math.Max(0, math.Min(1, ((cx-ax)*dx+(cy-ay)*dy)/l2))
			}
			ex, ey := cx-(ax+t*dx), cy-(ay+t*dy)
			c := float32(math.Max(0, math.Min(1, r+0.5-math.Hypot(ex, ey))))
			if i := y*plotW + x; c > cov[i] {
				cov[i] = c
			}
		}
	}
}

// composite blends c into img with per-pixel coverage cov.
func composite(img *image.RGBA, cov []float32, c color.RGBA) {
	for i, a := range cov {
		if a <= 0 {
			continue
		}
		o := (i/plotW)*img.Stride + (i%plotW)*4
		p := img.Pix[o : o+4 : o+4]
		p[0] = blend(p[0], c.R, a)
		p[1] = blend(p[1], c.G, a)
		p[2] = blend(p[2], c.B, a)
		p[3] = 255
	}
}

func blend(dst, src uint8, a float32) uint8 {
	return uint8(float32(dst)*(1-a) + float32(src)*a + 0.5)
}

// textMask renders s in basicfont's 7x13 face as a one-pixel-per-glyph-pixel mask.
func textMask(s string) *image.Alpha {
	mask := image.NewAlpha(image.Rect(0, 0, max(1, len(s)*glyphW), glyphH))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: basicfont.Face7x13, Dot: fixed.P(0, glyphAscent)}
	d.DrawString(s)
	return mask
}

// drawText draws s at textScale; ax places x at the left edge (0), the
// centre (0.5) or the right edge (1) of the text, ay places y at its top
// (0), middle (0.5) or bottom (1).
func drawText(img *image.RGBA, x, y int, s string, c color.Color, ax, ay float64) {
	mask := textMask(s)
	w := mask.Bounds().Dx() * textScale
	h := mask.Bounds().Dy() * textScale
	x -= int(ax * float64(w))
	y -= int(ay * float64(h))
	src := image.NewUniform(c)
	for my := 0; my < mask.Bounds().Dy(); my++ {
		for mx := 0; mx < mask.Bounds().Dx(); mx++ {
			if mask.AlphaAt(mx, my).A == 0 {
				continue
			}
			r := image.Rect(x+mx*textScale, y+my*textScale, x+(mx+1)*textScale, y+(my+1)*textScale)
			draw.DrawMask(img, r, src, image.Point{}, image.NewUniform(mask.AlphaAt(mx, my)), image.Point{}, draw.Over)
		}
	}
}

// drawTextVertical draws s at textScale rotated a quarter turn
// anticlockwise (reading bottom to top), its left edge at x and its middle
// at y.
func drawTextVertical(img *image.RGBA, x, y int, s string, c color.Color) {
	mask := textMask(s)
	mw, mh := mask.Bounds().Dx(), mask.Bounds().Dy()
	src := image.NewUniform(c)
	top := y - mw*textScale/2
	for my := 0; my < mh; my++ {
		for mx := 0; mx < mw; mx++ {
			a := mask.AlphaAt(mx, my)
			if a.A == 0 {
				continue
			}
			// Rotating anticlockwise: glyph column mx goes up from the
			// bottom, glyph row my goes right.
			rx := x + my*textScale
			ry := top + (mw-1-mx)*textScale
			r := image.Rect(rx, ry, rx+textScale, ry+textScale)
			draw.DrawMask(img, r, src, image.Point{}, image.NewUniform(a), image.Point{}, draw.Over)
		}
	}
}
