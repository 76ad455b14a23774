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
      error = assert_raises(SolidJobs::ConfigurationError, setting.to_s) { SolidJobs.configure { |c| c.public_send(:"#{setting}=", value) } }
      assert_match(/#{setting}|task option/, error.message)
    end
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.channels = [["a", 0]] } }
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.channels = %w[a a] } }
    assert_raises(SolidJobs::ConfigurationError) { SolidJobs.configure { |c| c.heartbeat_interval = 5; c.recovery_delay = 4 } }
  end

  def test_redis_url_environment_variable_replaces_the_default
    ENV["SOLID_JOBS_REDIS_URL"] = "redis://10.0.0.9:6380/2"
    assert_equal "redis://10.0.0.9:6380/2", SolidJobs::Configuration.new.redis_url
  ensure
    ENV.delete("SOLID_JOBS_REDIS_URL")
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
