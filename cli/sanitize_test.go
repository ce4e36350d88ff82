package cli

import "testing"

func TestPlainText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain line\twith tab", "plain line\twith tab"},
		{"héllo ✔ 日本", "héllo ✔ 日本"},
		{"\x1b[31mred\x1b[0m text", "red text"},
		{"\x1b[2J\x1b[H cleared", " cleared"},
		{"\x1b[1;31;4mmany\x1b[m", "many"},
		{"\x1b[?25lhidden cursor", "hidden cursor"},
		{"title\x1b]0;pwned\x07 after", "title after"},
		{"clip\x1b]52;c;ZXZpbA==\x1b\\ after", "clip after"},
		{"\x1b]8;;https://evil.example\x1b\\https://good.example\x1b]8;;\x1b\\", "https://good.example"},
		{"dcs\x1bPq#0;2;0;0;0\x1b\\ end", "dcs end"},
		{"\x1b7saved\x1b8", "saved"},
		{"\x1b(Bcharset", "charset"},
		{"bell\x07 back\b\bspace", "bell backspace"},
		{"progress 10%\rprogress 100%", "progress 10%progress 100%"},
		{"nul\x00del\x7f", "nuldel"},
		{"c1 \u009b31mcsi \u009d0;x\u009cosc", "c1 csi osc"},
		{"bad \xff\xfe utf8", "bad \ufffd\ufffd utf8"},
		{"8-bit csi \x9b2J", "8-bit csi \ufffd2J"},
		{"unterminated \x1b]0;title", "unterminated "},
		{"trailing esc \x1b", "trailing esc "},
		{"csi broken \x1b[12\nnext", "csi broken \nnext"},
	} {
		if got := plainText(tc.in); got != tc.want {
			t.Errorf("plainText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
