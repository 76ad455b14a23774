# frozen_string_literal: true

require "open3"
require "tmpdir"
require "fileutils"
require "timeout"

# Debian's `chromium`, headless, as a test drives it: the DOM after the
# page's scripts ran (--dump-dom) and a screenshot. Each run gets its own
# profile directory, so runs never share state.
class HeadlessChromium
  CANDIDATES = %w[/usr/bin/chromium /usr/bin/chromium-browser].freeze
  FLAGS = %w[--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check
             --disable-extensions --disable-background-networking --hide-scrollbars --mute-audio].freeze

  def self.path
    CANDIDATES.find { |p| File.executable?(p) } ||
      ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, "chromium") }.find { |p| File.executable?(p) }
  end

  def initialize(path = self.class.path, timeout: 60)
    @path = path
    @timeout = timeout
  end

  # The serialized DOM once the page loaded; `wait_ms` of virtual time lets
  # timers (the live refresh) run first.
  def dump_dom(url, wait_ms: nil)
    args = ["--dump-dom"]
    args << "--virtual-time-budget=#{wait_ms}" if wait_ms
    out, = run(*args, url)
    out
  end

  def screenshot(url, path, width: 1280, height: 1600)
    FileUtils.mkdir_p(File.dirname(path))
    FileUtils.rm_f(path)
    _, err = run("--screenshot=#{path}", "--window-size=#{width},#{height}", url)
    raise "chromium wrote no screenshot at #{path}:\n#{err}" unless File.size?(path)

    path
  end

  private

  def run(*args)
    Dir.mktmpdir("solid-jobs-chromium") do |profile|
      # Its own process group, so a hung run is killed with all its helpers.
      Open3.popen3(@path, *FLAGS, "--user-data-dir=#{profile}", *args, pgroup: true) do |stdin, stdout, stderr, wait|
        stdin.close
        out_reader = Thread.new { stdout.read }
        err_reader = Thread.new { stderr.read }
        unless wait.join(@timeout)
          Process.kill("KILL", -wait.pid)
          wait.join
          raise "chromium did not finish within #{@timeout}s: #{args.join(" ")}"
        end
        out = out_reader.value
        err = err_reader.value
        raise "chromium failed (#{wait.value.inspect}): #{err}" unless wait.value.success?

        [out, err]
      end
    end
  end
end
