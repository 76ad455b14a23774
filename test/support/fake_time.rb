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
    lib = library or raise "libfaketime is not installed (bin/setup installs the faketime package)"
    {"LD_PRELOAD" => lib, "FAKETIME" => offset, "FAKETIME_DONT_FAKE_MONOTONIC" => "1"}
  end
end
