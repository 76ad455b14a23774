# frozen_string_literal: true

require_relative "test_helper"
require "logger"

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
    ractors.each { |r| assert_equal :done, r.take }
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
    sleep 0.2
    assert_empty logger.lines, "nothing is counted twice"
    assert_equal sent + 1, delivered + notices.sum(&:last)
  end
end
