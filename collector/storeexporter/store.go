package storeexporter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The store on disk, as otel_llm/_show/_store/_segments.py keeps it (read that module's
// docstring): `segments` is a link to the current generation, a directory of hard links under
// `generations/`. A segment is written to `tmp/`, flushed to disk, then linked into the current
// generation under its final name in one rename, holding the publish lock shared; should a
// merge switch generations meanwhile, it is linked into the new one too unless that merge took
// it in. This writer never merges (otel-llm's processes do, under the compaction lock).

type store struct {
	path   string
	spec   storeSpec
	layout int
	token  string // names apart the files of processes that share a pid
	pid    int
	serial atomic.Int64 // segments written by this process
	temps  atomic.Int64 // temporaries made by this process
	tmpRe  *regexp.Regexp
	// linked is called after each link into a generation (tests switch generations there, as
	// a concurrent merge would); nil otherwise.
	linked func(number int)
	// repaired says what opening the store put right (a segments link that named no
	// generation), for the exporter to log; empty when nothing.
	repaired string
}

// globCharacters are what DuckDB's glob reads as a pattern (the backslash escapes the next
// character): readers find the segments through a glob over the store's path, so the path has
// none of them (otel_llm/_show/_store/_glob.py's GLOB_CHARACTERS, which refuses the same).
const globCharacters = "*?[]{}\\"

func newToken() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// expandHome expands a leading ~ or ~user to that home directory, as a shell would and as
// otel-llm reads its path variables (otel_llm/_env.py's env_path): the store's path often
// comes from where no shell ran (a systemd unit, a Docker environment). Left as it is when
// that home directory is unknown.
func expandHome(path string) string {
	if !strings.HasPrefix(path, "~") {
		return path
	}
	name, rest, _ := strings.Cut(path[1:], string(filepath.Separator))
	var home string
	if name == "" {
		if dir, err := os.UserHomeDir(); err == nil {
			home = dir
		} else if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	} else if u, err := user.Lookup(name); err == nil {
		home = u.HomeDir
	}
	if home == "" {
		return path
	}
	return filepath.Join(home, rest)
}

func openStore(path string, format *segmentFormat) (*store, error) {
	abs, err := filepath.Abs(expandHome(path))
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(abs, globCharacters) {
		return nil, fmt.Errorf("the store's path %q has a character DuckDB's glob reads as a "+
			"pattern (one of %s): otel-llm's readers refuse it; choose a path without them", abs, globCharacters)
	}
	re, err := regexp.Compile(format.Store.TemporaryPattern)
	if err != nil {
		return nil, fmt.Errorf("schema.json's temporary_pattern: %w", err)
	}
	s := &store{path: abs, spec: format.Store, layout: format.Layout, token: newToken(), pid: os.Getpid(), tmpRe: re}
	if err := s.create(format); err != nil {
		return nil, fmt.Errorf("cannot open the store %s: %w", abs, err)
	}
	return s, nil
}

// errNoSpace: a full disk (or quota) is a passing state, not a reason to refuse to start.
func errNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// checkWritable does what sealing a segment does to the file system, with an empty file: made
// in tmp/, flushed, linked into the current generation under a hidden name, then both removed.
// A store this process cannot write (another user's, a read-only mount) is refused at start,
// where the Collector would otherwise answer its health check and then fail every export. A
// full disk is not refused (a seal fails and its senders retry until there is room): the
// error returned then satisfies errNoSpace.
func (s *store) checkWritable() error {
	tmp := s.join(s.spec.Tmp, s.temporaryName("probe"))
	defer os.Remove(tmp)
	if err := writeSynced(tmp, nil); err != nil {
		return err
	}
	number, err := s.current()
	if err != nil {
		return err
	}
	hidden := filepath.Join(s.generationDir(number), s.temporaryName("probe"))
	defer os.Remove(hidden)
	return os.Link(tmp, hidden)
}

func (s *store) join(parts ...string) string {
	return filepath.Join(append([]string{s.path}, parts...)...)
}

// temporaryName is `.<name>.<pid>.<token>.<n>.tmp`: otel-llm's orphan rule finds it once this
// process is gone.
func (s *store) temporaryName(name string) string {
	return fmt.Sprintf(".%s.%d.%s.%d.tmp", name, s.pid, s.token, s.temps.Add(1))
}

// segmentName is `<ns:020d>-<pid>-<token>-<n:06d>.parquet`, as the Python writer names them.
func (s *store) segmentName() string {
	return fmt.Sprintf("%020d-%d-%s-%06d.parquet", time.Now().UnixNano(), s.pid, s.token, s.serial.Add(1)-1)
}

func (s *store) generationDir(number int) string {
	return s.join(s.spec.Generations, fmt.Sprintf("%0*d", s.spec.GenerationDigits, number))
}

// create makes the directory a store (idempotent, safe beside otel-llm's processes doing the
// same: the marker comes first). A store of the first layout (a plain segments/ directory) is
// refused: otel-llm migrates it the first time one of its writers opens it.
func (s *store) create(format *segmentFormat) error {
	if err := os.MkdirAll(s.path, 0o755); err != nil {
		return err
	}
	marker := s.join(s.spec.Marker)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		if foreign := s.foreign(); len(foreign) > 0 {
			return fmt.Errorf("the directory is not an otel-llm store and holds other files (%s)",
				strings.Join(foreign, ", "))
		}
		text, _ := json.Marshal(map[string]any{"layout": s.layout, "format": s.spec.MarkerFormat})
		if err := s.writeFile(marker, append(text, '\n')); err != nil {
			return err
		}
	}
	for _, lock := range []string{s.spec.CompactionLock, s.spec.PublishLock} {
		f, err := os.OpenFile(s.join(lock), os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	for _, dir := range []string{s.spec.Tmp, s.spec.Generations} {
		if err := os.Mkdir(s.join(dir), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	link := s.join(s.spec.Segments)
	info, err := os.Lstat(link)
	switch {
	case err == nil && info.IsDir():
		return fmt.Errorf("it keeps its segments in the first layout (a plain %s/ directory): "+
			"open it once with otel-llm (`otel-llm query --db %s`) to migrate it", s.spec.Segments, s.path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err != nil:
		if err := s.withLock(s.spec.CompactionLock, syscall.LOCK_EX, s.startGenerations); err != nil {
			return err
		}
	case s.linkProblem() != "":
		if err := s.relink(); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(link, s.spec.SchemaSegment)); errors.Is(err, fs.ErrNotExist) {
		rows, err := newRows(format, nil)
		if err != nil {
			return err
		}
		defer rows.release()
		rec := rows.record()
		defer rec.Release()
		data, err := encodeSegment(format, rec)
		if err != nil {
			return err
		}
		return s.seal(data, s.spec.SchemaSegment)
	}
	return nil
}

func (s *store) foreign() []string {
	entries, _ := os.ReadDir(s.path)
	ours := map[string]bool{s.spec.Marker: true, s.spec.Segments: true, s.spec.CompactionLock: true,
		s.spec.PublishLock: true, s.spec.Tmp: true, s.spec.Generations: true, "quarantine": true}
	var found []string
	for _, e := range entries {
		if !ours[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			found = append(found, e.Name())
		}
	}
	return found
}

// startGenerations points segments at the newest whole generation, or a new first one (under
// the exclusive compaction lock; another process may have done it while this one waited).
func (s *store) startGenerations() error {
	if _, err := os.Lstat(s.join(s.spec.Segments)); err == nil {
		return nil
	}
	return s.pointAtNewestWhole()
}

// linkProblem says what is wrong with the segments link ("" when nothing, or when there is no
// link): it names no generation (edited by hand, by a sync tool), or one that is not there.
func (s *store) linkProblem() string {
	target, err := os.Readlink(s.join(s.spec.Segments))
	if err != nil {
		return ""
	}
	if number, ok := generationNumber(target); ok {
		if info, err := os.Stat(s.generationDir(number)); err == nil && info.IsDir() {
			return ""
		}
	}
	return fmt.Sprintf("has a %s link to %q, which is not one of its generations (%s/<number>); "+
		"`otel-llm compact --db %s` points it at the newest whole generation (when no other "+
		"otel-llm process is reading the store)", s.spec.Segments, target, s.spec.Generations, s.path)
}

// generationNumber is the number of the generation a segments link's target names, as
// otel-llm reads it (its last part, all digits).
func generationNumber(target string) (int, bool) {
	target = strings.TrimRight(target, "/")
	name := target[strings.LastIndexByte(target, '/')+1:]
	if name == "" || strings.Trim(name, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(name)
	return n, err == nil
}

// relink points a segments link that names no generation at the newest whole one, as
// otel-llm's openers do: under the compaction lock, taken without waiting (while an otel-llm
// process reads the store, the link is left alone and the store refused, naming the problem).
func (s *store) relink() error {
	f, err := os.OpenFile(s.join(s.spec.CompactionLock), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return errors.New(s.linkProblem())
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return errors.New(s.linkProblem())
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	problem := s.linkProblem()
	if problem == "" {
		return nil // another process put it right meanwhile
	}
	if err := s.pointAtNewestWhole(); err != nil {
		return fmt.Errorf("%s; pointing it at the newest whole generation failed: %w", problem, err)
	}
	target, _ := os.Readlink(s.join(s.spec.Segments))
	s.repaired = fmt.Sprintf("%s; pointed it at %s", strings.SplitN(problem, ";", 2)[0], target)
	return nil
}

// pointAtNewestWhole makes the newest whole generation current, or a new first one (caller
// holds the exclusive compaction lock).
func (s *store) pointAtNewestWhole() error {
	numbers, err := s.generationNumbers()
	if err != nil {
		return err
	}
	number, whole := 1, false
	for _, n := range numbers {
		if _, err := os.Stat(filepath.Join(s.generationDir(n), s.spec.Carried)); err == nil {
			number, whole = n, true
		}
	}
	if err := os.MkdirAll(s.generationDir(number), 0o755); err != nil {
		return err
	}
	if !whole {
		text := []byte(`{"merged": null, "inputs": []}`)
		if err := s.writeFile(filepath.Join(s.generationDir(number), s.spec.Consumed), text); err != nil {
			return err
		}
	}
	if err := s.switchTo(number); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.generationDir(number), s.spec.Carried), os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func (s *store) generationNumbers() ([]int, error) {
	entries, err := os.ReadDir(s.join(s.spec.Generations))
	if err != nil {
		return nil, err
	}
	var numbers []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	return numbers, nil
}

func (s *store) switchTo(number int) error {
	link := s.join(s.temporaryName(s.spec.Segments))
	_ = os.Remove(link)
	target := s.spec.Generations + "/" + fmt.Sprintf("%0*d", s.spec.GenerationDigits, number)
	if err := os.Symlink(target, link); err != nil {
		return err
	}
	if err := os.Rename(link, s.join(s.spec.Segments)); err != nil {
		_ = os.Remove(link)
		return err
	}
	return fsyncDir(s.path)
}

// current is the current generation's number.
func (s *store) current() (int, error) {
	target, err := os.Readlink(s.join(s.spec.Segments))
	if err != nil {
		return 0, err
	}
	number, ok := generationNumber(target)
	if !ok {
		return 0, errors.New(s.linkProblem())
	}
	return number, nil
}

// writeFile writes path whole or not at all (a temporary beside it, flushed, renamed).
func (s *store) writeFile(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), s.temporaryName(filepath.Base(path)))
	if err := writeSynced(tmp, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fsyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// write seals data as a new segment; its name.
func (s *store) write(data []byte) (string, error) {
	name := s.segmentName()
	return name, s.seal(data, name)
}

// seal writes data to tmp/, flushes it to disk and publishes it as name; the temporary is
// removed whatever happens (nothing half-written is ever seen under a segment's name).
func (s *store) seal(data []byte, name string) error {
	tmp := s.join(s.spec.Tmp, s.temporaryName(name))
	defer os.Remove(tmp)
	if err := writeSynced(tmp, data); err != nil {
		return err
	}
	return s.publish(tmp, name)
}

// publish links source into the current generation as name, holding the publish lock shared
// (a merger holds it exclusively for the instant it carries the last new segments over and
// switches); again into the next generation when a merge switched meanwhile, unless that merge
// took name in. Then the generation's directory is flushed: the segment is there for good.
func (s *store) publish(source, name string) error {
	return s.withLock(s.spec.PublishLock, syscall.LOCK_SH, func() error {
		number, err := s.current()
		if err != nil {
			return err
		}
		for {
			if err := s.linkInto(number, source, name); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				// the generation was removed (this writer was very late): the current one takes it
				now, nerr := s.current()
				if nerr != nil {
					return nerr
				}
				if _, serr := os.Stat(source); now == number || serr != nil {
					return err
				}
				number = now
				continue
			}
			if s.linked != nil {
				s.linked(number)
			}
			now, err := s.current()
			if err != nil {
				return err
			}
			if now == number || s.consumedSince(number, now, name) {
				return fsyncDir(s.generationDir(number))
			}
			number = now
		}
	})
}

// linkInto makes source appear as name in generation number in one atomic rename.
func (s *store) linkInto(number int, source, name string) error {
	dir := s.generationDir(number)
	if there, err := os.Stat(filepath.Join(dir, name)); err == nil {
		if src, err := os.Stat(source); err == nil && os.SameFile(there, src) {
			return nil // there already (a merger's carry-over and this writer both did it)
		}
	}
	hidden := filepath.Join(dir, s.temporaryName(name))
	if err := os.Link(source, hidden); err != nil {
		return err
	}
	defer os.Remove(hidden) // a rename onto another link of the same file leaves it in place
	return os.Rename(hidden, filepath.Join(dir, name))
}

// consumedSince says whether a merge between generations number and now took name in.
func (s *store) consumedSince(number, now int, name string) bool {
	for later := number + 1; later <= now; later++ {
		data, err := os.ReadFile(filepath.Join(s.generationDir(later), s.spec.Consumed))
		if err != nil {
			continue
		}
		var record struct {
			Inputs []string `json:"inputs"`
		}
		if json.Unmarshal(data, &record) == nil && slices.Contains(record.Inputs, name) {
			return true
		}
	}
	return false
}

// withLock runs fn holding the store's lock file name with flock (how: LOCK_SH or LOCK_EX);
// a store whose lock file cannot be opened runs fn without it, as otel-llm does.
func (s *store) withLock(name string, how int, fn func() error) error {
	f, err := os.OpenFile(s.join(name), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fn()
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("cannot lock %s: %w", name, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return fn()
}

// removeOrphans removes the temporaries in tmp/ of processes of this host that are gone (a
// Collector killed mid-write), as otel-llm's openers do; younger than orphan_dead_after_s they
// may be writes in flight of a process in another pid namespace, and stay.
func (s *store) removeOrphans() int {
	dir := s.join(s.spec.Tmp)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	wait := time.Duration(s.spec.OrphanDeadAfterS * float64(time.Second))
	for _, e := range entries {
		m := s.tmpRe.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[s.tmpRe.SubexpIndex("pid")])
		if err != nil || pid == s.pid {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < wait {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH && os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	return removed
}
