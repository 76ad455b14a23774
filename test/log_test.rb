# frozen_string_literal: true

require_relative "test_helper"
require "logger"
require "open3"

# SolidJobs::Log in-process: the settings, and the logger route's queue
# (test/logging_test.rb covers real worker processes).
class LogTest < SolidJobsTest
  # A Logger whose add waits until released, to fill the route's queue.
  class GatedLogger
    attr_reader :lines, :entered

    def initialize
      @lines = Queue.new
      @gate = Queue.new
    end

    def add(severity, message)
      @entered = true
      @gate&.pop
      @lines << [severity, message]
    end

    def open! = (gate, @gate = @gate, nil) && gate.close
  end

  def setup
    super
    @level = SolidJobs::Log.level
    @format = SolidJobs::Log.format
  end

  def teardown
    SolidJobs::Log.logger = nil
    SolidJobs::Log.level = @level
    SolidJobs::Log.format = @format
    super
  end

  def test_settings_are_validated_and_name_the_setting
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.log_level = :loud } }
    assert_match(/invalid log_level :loud: expected one of debug, info, warn, error, none/, error.message)
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.log_format = "xml" } }
    assert_match(/invalid log_format "xml": expected one of text, json/, error.message)
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.logger = Object.new } }
    assert_match(/invalid logger .*Logger's interface/, error.message)
    assert_nil SolidJobs::Log.logger, "a configure that raised installed nothing"
    SolidJobs.configure do |c|
      c.log_level = "DEBUG"
      c.log_format = :json
    end
    assert_equal %i[debug json], [SolidJobs::Log.level, SolidJobs::Log.format]
    assert_equal :debug, SolidJobs.config.log_level
  end

  def test_the_environment_is_only_the_default
    env = {"SOLID_JOBS_LOG_LEVEL" => "warn", "SOLID_JOBS_LOG_FORMAT" => "json"}
    script = 'require "solid_jobs"; print SolidJobs::Log.level, " ", SolidJobs.config.log_format; ' \
             'SolidJobs.configure { |c| c.log_level = :error }; print " ", SolidJobs::Log.level'
    out, err, status = SolidJobsCommand.ruby3(env, "-e", script)
    assert status.success?, err
    assert_equal "warn json error", out
    out, = SolidJobsCommand.ruby3({"SOLID_JOBS_LOG_LEVEL" => "loud"}, "-e", script)
    assert_equal "info text error", out, "an unknown value in the environment falls back to the default"
  end

  # Lines from worker Ractors reach the one logger in the main Ractor; a
  # full queue drops lines and says how many, and nothing is counted twice.
  def test_a_full_route_drops_and_counts_lines_instead_of_blocking_writers
    logger = GatedLogger.new
    SolidJobs.configure do |c|
      c.log_level = :debug
      c.logger = logger
    end
    # The draining thread holds a batch (the first line, waiting in add)
    # while the queue fills: the count of drops must survive a full queue.
    SolidJobs::Log.debug("first")
    eventually("the logger holds the first line") { logger.entered }
    sent = 11_000
    ractors = Array.new(2) do |r|
      Ractor.new(r, sent / 2) do |id, n|
        n.times { |i| SolidJobs::Log.debug("line", worker_id: id, seq: i) }
        :done
      end
    end
    ractors.each { |r| assert_equal :done, SolidJobs::RactorCompat.join(r) }
    logger.open!
    notices = []
    delivered = 0
    eventually("every line delivered or counted") do
      until logger.lines.empty?
        severity, line = logger.lines.pop
        line.include?("log line(s) dropped") ? notices << [severity, Integer(line[/ dropped=(\d+)/, 1])] : delivered += 1
      end
      delivered + notices.sum(&:last) >= sent + 1
    end
    refute_empty notices, "the drop is reported"
    assert(notices.all? { |severity, dropped| severity == Logger::WARN && dropped.positive? }, notices.inspect)
    # A later line: a notice counted twice would be queued before it.
    SolidJobs::Log.debug("later-marker")
    late = []
    eventually("the later line delivered") do
      late << logger.lines.pop until logger.lines.empty?
      late.any? { |_, line| line.include?("later-marker") }
    end
    assert_equal 1, late.size, "nothing is counted twice: #{late.inspect}"
    assert_equal sent + 1, delivered + notices.sum(&:last)
  end

  # A logger that never returns (a stalled log shipper) cannot keep the
  # process from exiting: the exit waits FLUSH_SECONDS, then what is still
  # queued goes to stderr. In a child process, as an operator's stop is.
  def test_a_stalled_logger_does_not_hang_the_exit
    script = <<~RUBY
      require "solid_jobs"
      require "logger"
      _reader, writer = IO.pipe # nobody reads: writes block once the pipe is full
      SolidJobs.configure { |c| c.log_level = :info; c.logger = Logger.new(writer) }
      2_000.times { |i| SolidJobs::Log.info("line \#{i} " + ("x" * 200)) }
    RUBY
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    _out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.expand_path("../lib", __dir__), "-e", script)
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert status.success?, err
    assert_operator elapsed, :<, SolidJobs::Log::FLUSH_SECONDS + 8, "the exit waited for the stalled logger"
    assert_match(/line 1999 x+$/, err, "the last lines went to stderr, not lost")
  end

  # Replacing a logger that hangs returns at once, and its draining thread
  # never calls the next logger (one thread per logger).
  def test_replacing_a_hung_logger_returns_and_never_shares_the_next_one
    hung = GatedLogger.new
    SolidJobs.configure do |c|
      c.log_level = :info
      c.logger = hung
    end
    SolidJobs::Log.info("held")
    eventually("the logger holds the line") { hung.entered }
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    recorder = GatedLogger.new
    recorder.open!
    SolidJobs::Log.logger = recorder
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 2.5
    SolidJobs::Log.info("after")
    hung.open!
    eventually("the new logger has its line") { !recorder.lines.empty? }
    # The hung logger's thread finishes its call, then ends: it is done
    # with loggers, and anything it gave the new one is there.
    eventually("the hung logger's thread returned and ended") do
      !hung.lines.empty? && Thread.list.count { |t| t.name == "solid-jobs-log" && t.alive? } == 1
    end
    assert_equal ["after"], Array.new(recorder.lines.size) { recorder.lines.pop.last[/(held|after)/] }
    assert_equal 1, Thread.list.count { |t| t.name == "solid-jobs-log" && t.alive? }
  end

  # A forked child has no draining thread: its lines go to stderr.
  def test_a_forked_child_logs_to_stderr
    SolidJobs.configure do |c|
      c.log_level = :info
      c.logger = Logger.new(File::NULL)
    end
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      $stderr.reopen(writer)
      SolidJobs::Log.info("from the child")
      exit!(0)
    end
    writer.close
    Process.wait(pid)
    assert_match(/INFO pid=#{pid} .*from the child/, reader.read)
  end
end
