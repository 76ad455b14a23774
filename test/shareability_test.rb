# frozen_string_literal: true

require_relative "test_helper"
require "logger"
require "open3"
require "rbconfig"

# Making a user's object Ractor-shareable either succeeds or changes
# nothing: a refused instrumenter, DSL block or configuration leaves every
# object it reaches as it was (Ractor.make_shareable alone freezes what it
# meets before the object it refuses). And settings keep copies of the
# caller's strings, so starting workers freezes nothing of theirs.
class ShareabilityTest < SolidJobsTest
  class LoggingInstrumenter
    def initialize(logger) = (@logger = logger)
    def instrument(name, _payload) = @logger.info(name)
  end

  class PassThrough
    def initialize(*) = nil
    def around(_context) = yield
  end

  def test_refusing_an_instrumenter_holding_a_stdout_logger_leaves_stdout_writable
    script = <<~RUBY
      require "solid_jobs"
      require "logger"
      class Instrumenter
        def initialize(logger) = (@logger = logger)
        def instrument(name, _payload) = @logger.info(name)
      end
      begin
        SolidJobs.configure { |c| c.instrumenter = Instrumenter.new(Logger.new($stdout)) }
      rescue SolidJobs::ConfigurationError => e
        $stderr.puts(e.message)
      end
      puts "stdout frozen: \#{$stdout.frozen?}"
    RUBY
    out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.join(ROOT, "lib"), "-e", script)
    assert status.success?, "the process could not write to $stdout after the refusal:\n#{err}"
    assert_equal "stdout frozen: false\n", out
    assert_match(/the instrumenter must be Ractor-shareable.*a Monitor, which cannot be shared.*nothing was frozen/, err)
  end

  def test_a_refused_instrumenter_and_everything_it_holds_stay_as_they_were
    reader, writer = IO.pipe
    logger = Logger.new(writer)
    instrumenter = LoggingInstrumenter.new(logger)
    error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.instrumenter = instrumenter } }
    assert_match(/instrumenter\.@logger\.@logdev\.@mon_data is a Monitor/, error.message)
    [instrumenter, logger, logger.instance_variable_get(:@logdev), writer].each { |o| refute o.frozen?, "#{o.class} was frozen" }
    logger.info("still usable")
    assert_match(/still usable/, reader.read_nonblock(4096))
    assert SolidJobs::Instrumentation.null?(SolidJobs.config.instrumenter), "a refused instrumenter is not installed"
  ensure
    reader&.close
    writer&.close
  end

  def test_an_accepted_instrumenter_is_made_shareable_once_configure_succeeds
    instrumenter = Class.new do
      def initialize
        super
        @prefix = +"jobs."
      end

      def instrument(*) = nil
    end.new
    SolidJobs.configure { |c| c.instrumenter = instrumenter }
    assert Ractor.shareable?(instrumenter)
    assert_same instrumenter, SolidJobs.config.instrumenter
  end

  def test_a_refused_retry_delay_block_freezes_nothing_it_captures
    captured = {attempts: +"many"}
    error = assert_raises(SolidJobs::ConfigurationError) do
      Class.new do
        include SolidJobs::Task
        retry_delay { |_count, _error, _envelope| captured[:attempts] }
      end
    end
    assert_match(/the retry_delay block must be Ractor-shareable/, error.message)
    refute captured.frozen?
    refute captured[:attempts].frozen?
  end

  def test_a_configuration_that_cannot_be_shared_refuses_to_start_and_freezes_nothing
    argument = {lock: Mutex.new, label: +"audit"}
    SolidJobs.configure { |c| c.execute_interceptors.use(PassThrough, argument) }
    error = assert_raises(SolidJobs::ConfigurationError) { start_conductor }
    assert_match(/the configuration must be Ractor-shareable.*a Thread::Mutex.*nothing was frozen/, error.message)
    refute SolidJobs.config.frozen?, "the configuration was left as it was"
    refute argument.frozen?
    refute argument[:label].frozen?
    SolidJobs.configure { |c| c.concurrency = 3 } # still configurable
    assert_equal 3, SolidJobs.config.concurrency
  end

  def test_settings_keep_copies_so_starting_workers_freezes_none_of_the_callers_strings
    channel = +"critical"
    namespace = +@namespace
    task_channel = +"critical"
    SolidJobs.configure do |c|
      c.channels = [[channel, 2], "default"]
      c.namespace = namespace
      c.default_task_options = {channel: +"default"}
      c.channel_backends = {channel => :redis}
    end
    Class.new { include SolidJobs::Task }.task_options(channel: task_channel)
    start_conductor
    assert Ractor.shareable?(SolidJobs.config)
    [channel, namespace, task_channel].each { |s| refute s.frozen?, "#{s.inspect} was frozen" }
  end

  def test_the_walk_sees_what_make_shareable_would_meet
    check = ->(object) { SolidJobs::Shareable.obstacle(object, "x") }
    assert_nil check.call([+"a", {b: [+"c"]}, 1..2, Struct.new(:m).new(+"s")])
    assert_match(/x\[1\]\[:b\]\[0\] is a Thread::Queue/, check.call([1, {b: [Queue.new]}]))
    assert_match(/x's default proc is a Proc that cannot be shared/, check.call(Hash.new { |h, k| h[k] = [] }))
    assert_match(/x\.m is a Thread::Mutex/, check.call(Struct.new(:m).new(Mutex.new)))
    error = begin
      raise "boom"
    rescue StandardError => e
      e
    end
    refute_nil check.call(error), "an exception's internal backtrace is visited, as make_shareable does"
    refute error.frozen?
  end
end
