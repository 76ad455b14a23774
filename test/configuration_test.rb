# frozen_string_literal: true

require_relative "test_helper"

class ConfigurationTest < SolidJobsTest
  def test_defaults
    config = SolidJobs::Configuration.new
    assert_equal [["default", 1]], config.channels
    assert_equal :weighted, config.channel_order
    assert_equal 8, config.concurrency
    assert_equal 25, config.shutdown_timeout
    assert_equal :ractor, config.execution_mode
    assert_equal({channel: "default", max_failures: 25}, config.default_task_options)
  end

  def test_channels_normalize_names_and_weights
    SolidJobs.configure { |c| c.channels = [["critical", 3], "default", "low,2"] }
    assert_equal [["critical", 3], ["default", 1], ["low", 2]], SolidJobs.config.channels
  end

  def test_invalid_values_raise_configuration_error_naming_the_setting
    {
      redis_url: "http://x", concurrency: 0, channel_order: :random, execution_mode: :fork,
      shutdown_timeout: -1, channels: [], default_task_options: {retry: 3}, recovery_delay: 0
    }.each do |setting, value|
      error = assert_raises(SolidJobs::ConfigurationError, setting.to_s) do
        SolidJobs.configure { |c| c.public_send(:"#{setting}=", value) }
      end
      assert_match(/#{setting}|task option/, error.message)
    end
    # Values a YAML file can hold, which have no to_sym: a clear error too.
    [5, nil, ["ractor"], 1.5].each do |value|
      assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.channel_order = value } }
      assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.execution_mode = value } }
    end
    SolidJobs.configure { |c| c.channel_order = "priority" }
    assert_equal :priority, SolidJobs.config.channel_order
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.channels = [["a", 0]] } }
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.channels = %w[a a] } }
    assert_raises(SolidJobs::ConfigurationError) do
      SolidJobs.configure do |c|
        c.heartbeat_interval = 5
        c.recovery_delay = 4
      end
    end
  end

  def test_redis_url_environment_variable_replaces_the_default
    ENV["SOLID_JOBS_REDIS_URL"] = "redis://10.0.0.9:6380/2"
    assert_equal "redis://10.0.0.9:6380/2", SolidJobs::Configuration.new.redis_url
  ensure
    ENV.delete("SOLID_JOBS_REDIS_URL")
  end

  class PassThrough
    def around(_context) = yield
  end

  def test_a_configure_whose_block_raises_changes_nothing
    before = SolidJobs.config
    instrumenter = Class.new do
      def initialize
        super
        @sink = +""
      end

      def instrument(*) = nil
    end.new
    assert_raises(RuntimeError) do
      SolidJobs.configure do |c|
        c.concurrency = 7
        c.namespace = "elsewhere"
        c.execute_interceptors.use(PassThrough)
        c.instrumenter = instrumenter
        raise "boom"
      end
    end
    assert_same before, SolidJobs.config
    assert_equal [2, @namespace], [SolidJobs.config.concurrency, SolidJobs.config.namespace]
    assert SolidJobs.config.execute_interceptors.empty?, "no interceptor from the failed block"
    assert SolidJobs::Instrumentation.null?(SolidJobs.config.instrumenter)
    refute instrumenter.frozen?, "the instrumenter of a failed configure is not frozen"
    id = LedgerTask.enqueue("/dev/null", "x")
    assert_equal id, JSON.parse(redis.lindex(key("channel:default"), 0))["id"], "jobs still go to the last good namespace"
  end

  def test_a_configure_refused_by_validation_is_not_kept_and_the_next_one_works
    error = assert_raises(SolidJobs::ConfigurationError) do
      SolidJobs.configure do |c|
        c.heartbeat_interval = 5
        c.recovery_delay = 4
      end
    end
    assert_match(/recovery_delay \(4\) must be longer than heartbeat_interval \(5\)/, error.message)
    assert_equal [0.5, 2], [SolidJobs.config.heartbeat_interval, SolidJobs.config.recovery_delay]
    SolidJobs.configure { |c| c.concurrency = 4 }
    assert_equal 4, SolidJobs.config.concurrency
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.backend = :mysql } }
    SolidJobs.configure { |c| c.concurrency = 5 }
    assert_equal [5, :redis], [SolidJobs.config.concurrency, SolidJobs.config.backend]
  end

  # Every backend spec and routing entry is checked when configured, not at
  # the first enqueue; the message names the setting. Nothing listens at the
  # URLs used here: none of these needs a connection to be refused.
  def test_backends_and_routing_are_validated_at_configure_naming_the_setting
    engine = {adapter: :solid_engine, url: "tcp://127.0.0.1:7777"}
    {
      "backend = :mysql" => [->(c) { c.backend = :mysql }, /invalid backend :mysql: no such backend \(known: :redis/],
      "adapter: :sidekiq" => [->(c) { c.backends = {jobs: {adapter: :sidekiq}} }, /backends\[:jobs\]\[:adapter\] :sidekiq/],
      "no adapter" => [->(c) { c.backends = {jobs: {url: "tcp://h:1"}} }, /backends\[:jobs\]\[:adapter\] nil/],
      "engine url http://x" => [->(c) { c.backends = {jobs: engine.merge(url: "http://x")} },
                                %r{backends\[:jobs\]\[:url\] "http://x"}],
      "engine without url" => [->(c) { c.backends = {jobs: {adapter: :solid_engine}} },
                               /backends\[:jobs\] \(solid_engine\) needs url/],
      "redis url http://x" => [->(c) { c.backends = {jobs: {adapter: :solid_redis, url: "http://x"}} },
                               %r{backends\[:jobs\]\[:url\] "http://x"}],
      "redis url, bad port" => [->(c) { c.backends = {jobs: {adapter: :solid_redis, url: "redis://h:port/0"}} },
                                %r{backends\[:jobs\]\[:url\] "redis://h:port/0"}],
      "leas:" => [->(c) { c.backends = {jobs: engine.merge(leas: 5)} },
                  /unknown key\(s\) :leas in backends\[:jobs\].*did you mean :lease\?/],
      "lease: -1" => [->(c) { c.backends = {jobs: engine.merge(lease: -1)} },
                      /backends\[:jobs\]\[:lease\] -1: expected a number of seconds >= 0/],
      "lease: nil" => [->(c) { c.backends = {jobs: engine.merge(lease: nil)} }, /backends\[:jobs\]\[:lease\] nil/],
      "password: 42" => [->(c) { c.backends = {jobs: engine.merge(password: 42)} }, /backends\[:jobs\]\[:password\]/],
      "channel_ids" => [->(c) { c.backends = {jobs: engine.merge(channel_ids: {"a b" => 1})} },
                        /"a b" in backends\[:jobs\]\[:channel_ids\]/],
      "channel id -1" => [->(c) { c.backends = {jobs: engine.merge(channel_ids: {"a" => -1})} },
                          /backends\[:jobs\]\[:channel_ids\]\["a"\] -1/],
      "unknown routed backend" => [->(c) { c.channel_backends = {"critical" => :engine} },
                                   /channel_backends\["critical"\] :engine: no such backend/],
      "bad routed channel" => [->(c) { c.channel_backends = {"no spaces" => :redis} }, /channel_backends key "no spaces"/],
      "url without the engine backend" => [->(c) { c.url = "tcp://127.0.0.1:7777" },
                                           %r{config.url "tcp://127.0.0.1:7777" is used only with config.backend = :solid_eng}],
      "engine backend without url" => [->(c) { c.backend = :solid_engine }, /backend = :solid_engine needs config.url/],
      "url bad port" => [lambda do |c|
        c.backend = :solid_engine
        c.url = "tcp://h:port"
      end, %r{invalid url "tcp://h:port"}]
    }.each do |label, (change, message)|
      error = assert_raises(SolidJobs::ConfigurationError, label) { SolidJobs.configure(&change) }
      assert_match(message, error.message, label)
      kept = [SolidJobs.config.backend, SolidJobs.config.backends, SolidJobs.config.channel_backends, SolidJobs.config.url]
      assert_equal [:redis, {}, {}, nil], kept, "#{label}: nothing was kept"
    end
  end

  def test_valid_backend_specs_are_kept_as_checked_frozen_copies
    SolidJobs.configure do |c|
      c.backends = {
        jobs: {adapter: "solid_engine", url: "tcp://127.0.0.1:7777", lease: 5, password: "pw", channel_ids: {critical: 1}},
        cache: {adapter: :redis, url: REDIS.url}
      }
      c.channel_backends = {critical: :jobs, "low" => "cache"}
    end
    jobs = {adapter: :solid_engine, url: "tcp://127.0.0.1:7777", password: "pw", lease: 5, channel_ids: {"critical" => 1}}
    assert_equal({jobs: jobs, cache: {adapter: :solid_redis, url: REDIS.url}}, SolidJobs.config.backends)
    assert_equal({"critical" => :jobs, "low" => :cache}, SolidJobs.config.channel_backends)
    assert Ractor.shareable?(SolidJobs.config.backends)
    assert_equal 1, SolidJobs.routing.backend_for("critical").channel_id("critical")
    assert_kind_of SolidJobs::Backends::Redis, SolidJobs.routing.backend_for("low")
  end

  def test_configuration_is_frozen_once_workers_start
    start_conductor
    assert Ractor.shareable?(SolidJobs.config)
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.concurrency = 3 } }
  end

  def test_connection_timeouts_default_to_seconds_and_must_be_positive
    config = SolidJobs::Configuration.new
    assert_equal({connect: 2.0, read: 5.0, write: 5.0}, config.timeouts)
    %i[connect_timeout read_timeout write_timeout].each do |setting|
      [0, -1, Float::INFINITY, "5"].each do |value|
        error = assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.public_send(:"#{setting}=", value) } }
        assert_match(/#{setting}/, error.message)
      end
    end
    SolidJobs.configure { |c| c.read_timeout = 0.25 }
    assert_equal 0.25, SolidJobs.config.timeouts[:read]
  end
end
