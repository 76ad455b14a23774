# frozen_string_literal: true

# libfaketime (Debian package `faketime`) for clock tests: the environment
# that makes a child process see the wall clock shifted by an offset such
# as "+5m" or "-5m". It is what the `faketime` command sets up, without the
# command itself: `faketime` forks and waits, so signals sent to the pid a
# test holds would not reach the worker. The monotonic clock is left alone,
# so timeouts, sleeps and cross-process timings stay real.
module FakeTime
  LIBRARIES = %w[/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
                 /usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1
                 /usr/lib/faketime/libfaketimeMT.so.1].freeze

  module_function

  def library = LIBRARIES.find { |path| File.exist?(path) }

  def available? = !library.nil?

  # Environment for Process.spawn.
  def env(offset)
    {"LD_PRELOAD" => library!, "FAKETIME" => offset, "FAKETIME_DONT_FAKE_MONOTONIC" => "1"}
  end

  # Environment for a child whose wall clock the test steps while it runs:
  # the offset is read from `file` (write "-1h", "+0s", ... with `step`),
  # re-read at most every `cache` seconds. CLOCK_MONOTONIC and
  # CLOCK_BOOTTIME stay real, as when NTP or an operator steps a host.
  def stepping_env(file, cache: 1)
    step(file, "+0s") unless File.exist?(file)
    {"LD_PRELOAD" => library!, "FAKETIME_TIMESTAMP_FILE" => file, "FAKETIME_CACHE_DURATION" => cache.to_s,
     "FAKETIME_DONT_FAKE_MONOTONIC" => "1"}
  end

  # Replaces the offset at once (a rename), so the child never reads a
  # half-written file.
  def step(file, offset)
    File.write("#{file}.tmp", "#{offset}\n")
    File.rename("#{file}.tmp", file)
  end

  def library!
    library or raise "libfaketime is not installed (bin/setup installs the faketime package)"
  end
end
