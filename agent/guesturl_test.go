package agent

import "testing"

func TestGuestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":      "http://192.168.64.1:8080",
		"http://localhost:8080/x":    "http://192.168.64.1:8080/x",
		"http://[::1]:8080":          "http://192.168.64.1:8080",
		"https://builds.example.com": "https://builds.example.com",
		"http://10.0.0.5:8080":       "http://10.0.0.5:8080",
		"http://127.0.0.1":           "http://192.168.64.1",
	} {
		if got := GuestURL(in, "192.168.64.1"); got != want {
			t.Errorf("GuestURL(%q) = %q, want %q", in, got, want)
		}
	}
}
