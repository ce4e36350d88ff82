package hostsignals

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// Power is what `pmset -g batt` says of the power source.
type Power struct {
	Known      bool // the source line was understood
	OnBattery  bool // drawing from 'Battery Power' or 'UPS Power'
	HasBattery bool // an InternalBattery line: a laptop
	Percent    *int // the internal battery's charge
}

var (
	pmsetSource  = regexp.MustCompile(`^Now drawing from '([^']+)'`)
	pmsetPercent = regexp.MustCompile(`\t\s*(\d{1,3})%;`)
)

// ParsePmsetBatt reads `pmset -g batt`:
//
//	Now drawing from 'AC Power'
//	 -InternalBattery-0 (id=4653155)	80%; AC attached; not charging present: true
//
// A Mac mini prints the first line alone. A UPS is listed as its own line
// (" -CP1500 (id=123)	40%; discharging"), and while it carries the Mac the
// source is 'UPS Power', which counts as being on battery: the mains is out.
// Only the internal battery's charge is the Mac's.
func ParsePmsetBatt(out string) Power {
	var p Power
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := pmsetSource.FindStringSubmatch(line); m != nil {
			p.Known = true
			p.OnBattery = m[1] == "Battery Power" || m[1] == "UPS Power"
			continue
		}
		if !strings.Contains(line, "-InternalBattery-") {
			continue
		}
		p.HasBattery = true
		if m := pmsetPercent.FindStringSubmatch(line); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n <= 100 {
				p.Percent = &n
			}
		}
	}
	return p
}

var ioregIdle = regexp.MustCompile(`"HIDIdleTime"\s*=\s*(\d+)`)

// ParseIoregIdle reads the seconds since the last user input from
// `ioreg -c IOHIDSystem` ("HIDIdleTime" = nanoseconds). Some Macs list more
// than one IOHIDSystem; the most recent input (the smallest value) counts.
// ok is false when there is no reading.
func ParseIoregIdle(out string) (seconds int64, ok bool) {
	for _, m := range ioregIdle.FindAllStringSubmatch(out, -1) {
		ns, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			continue
		}
		s := int64(ns / 1e9)
		if !ok || s < seconds {
			seconds, ok = s, true
		}
	}
	return seconds, ok
}

var (
	thermLevel = regexp.MustCompile(`(?i)^\s*(?:Thermal|Performance) Warning Level\s*=\s*(\d+)`)
	thermLimit = regexp.MustCompile(`^\s*CPU_Speed_Limit\s*=\s*(\d+)`)
)

// ParsePmsetTherm reads `pmset -g therm` as a thermal state:
//
//	Note: No thermal warning level has been recorded
//	Note: No performance warning level has been recorded
//	2026-08-20 05:08:37 -0700 CPU Power notify
//		CPU_Scheduler_Limit 	= 100
//		CPU_Available_CPUs 	= 12
//		CPU_Speed_Limit 	= 100
//
// A recorded warning level ("Thermal Warning Level = 5") maps as IOKit
// defines them: 0 normal → nominal, 5 danger → serious, 10 crisis →
// critical, anything between → fair. A CPU speed limit below 100 % is the
// system slowing the CPU to cool it: under 100 → fair, under 70 → serious,
// under 40 → critical. The worst of the lines wins; output with none of
// them is unknown ("").
func ParsePmsetTherm(out string) Thermal {
	var t Thermal
	worse := func(u Thermal) {
		if t == "" || u.rank() > t.rank() {
			t = u
		}
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.ReplaceAll(sc.Text(), "\t", " ")
		switch {
		case strings.Contains(line, "No thermal warning level has been recorded"),
			strings.Contains(line, "No performance warning level has been recorded"):
			worse(ThermalNominal)
		case thermLevel.MatchString(line):
			n, _ := strconv.Atoi(thermLevel.FindStringSubmatch(line)[1])
			switch {
			case n == 0:
				worse(ThermalNominal)
			case n < 5:
				worse(ThermalFair)
			case n < 10:
				worse(ThermalSerious)
			default:
				worse(ThermalCritical)
			}
		case thermLimit.MatchString(line):
			n, _ := strconv.Atoi(thermLimit.FindStringSubmatch(line)[1])
			switch {
			case n >= 100:
				worse(ThermalNominal)
			case n >= 70:
				worse(ThermalFair)
			case n >= 40:
				worse(ThermalSerious)
			default:
				worse(ThermalCritical)
			}
		}
	}
	return t
}

// MemoryPressureLevel names a kern.memorystatus_vm_pressure_level value
// (1 normal, 2 warn, 4 critical); "" for any other.
func MemoryPressureLevel(level uint32) string {
	switch level {
	case 1:
		return MemoryNormal
	case 2:
		return MemoryWarn
	case 4:
		return MemoryCritical
	}
	return ""
}
