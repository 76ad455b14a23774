# frozen_string_literal: true

require_relative "test_helper"

# The settings Hashes that cross into the native extension: what the Ruby
# side builds (Backends::Redis#source_spec, Conductor#telemetry_spec, the
# publisher's telemetry) is accepted, and a key added, dropped or renamed on
# one side fails at the boundary with an ArgumentError naming it.
class NativeSettingsTest < SolidJobsTest
  def source_settings
    SolidJobs.routing.group(SolidJobs.config.channels).map do |backend, channels|
      backend.source_spec(channels, config: SolidJobs.config, node_id: "settings-node", description: "{}")
    end
  end

  def telemetry_settings = SolidJobs::Conductor.new.send(:telemetry_spec)

  def publisher_settings
    {hostname: "host", journal: true, sample_per_interval: 1, buffer: 10, journal_size: 100}
  end

  def dispatcher_error(sources, telemetry)
    assert_raises(ArgumentError) { SolidJobs::Native::Dispatcher.new(sources, telemetry) }.message
  end

  def test_the_hashes_the_ruby_side_builds_start_a_dispatcher
    dispatcher = SolidJobs::Native::Dispatcher.new(source_settings, telemetry_settings)
    assert_equal 0, dispatcher.inflight
    dispatcher.stop_claiming
    assert_equal 0, dispatcher.shutdown(1.0)
  end

  def test_source_settings_name_an_unknown_or_missing_key
    redis = source_settings.first
    assert_equal "redis", redis[:kind]

    assert_match(/source settings 0: unknown field `nodeid`/, dispatcher_error([redis.merge(nodeid: "x")], telemetry_settings))
    assert_match(/source settings 0: missing field `node_ttl`/, dispatcher_error([redis.except(:node_ttl)], telemetry_settings))
    assert_match(/missing field `kind`/, dispatcher_error([redis.except(:kind)], telemetry_settings))
    assert_match(/unknown variant `kafka`/, dispatcher_error([redis.merge(kind: "kafka")], telemetry_settings))
    assert_match(/invalid type: expected u32/,
                 dispatcher_error([redis.merge(channels: [["default", "heavy"]])], telemetry_settings))
    # The second Hash is named by its index; the first is not started.
    assert_match(/source settings 1: missing field `url`/, dispatcher_error([redis, redis.except(:url)], telemetry_settings))
  end

  def test_engine_source_settings_are_checked_before_any_source_starts
    engine = {kind: "engine", url: "tcp://127.0.0.1:1", password: nil, channels: [{name: "default", id: 7, weight: 1}],
              channel_order: "weighted", prefetch: nil, workers: 2, lease: 30.0}
    assert_match(/unknown field `wieght`/,
                 dispatcher_error([engine.merge(channels: [{name: "default", id: 7, weight: 1, wieght: 2}])], telemetry_settings))
    assert_match(/missing field `lease`/, dispatcher_error([engine.except(:lease)], telemetry_settings))
    assert_match(/unknown field `namespace`/, dispatcher_error([engine.merge(namespace: @namespace)], telemetry_settings))
  end

  def test_telemetry_settings_name_an_unknown_or_missing_key
    sources = source_settings
    assert_match(/node telemetry settings: missing field `deliver`/,
                 dispatcher_error(sources, telemetry_settings.except(:deliver)))
    assert_match(/node telemetry settings: unknown field `sample_rate`/,
                 dispatcher_error(sources, telemetry_settings.merge(sample_rate: 1)))
  end

  def test_publisher_telemetry_takes_symbol_or_string_keys_and_names_a_bad_one
    client = SolidJobs::Native::Client.new(REDIS.url, @namespace)
    client.enable_telemetry(publisher_settings.transform_keys(&:to_s))
    assert_match(/\Apublisher:host:#{Process.pid}:/o, client.telemetry_source)

    error = assert_raises(ArgumentError) do
      SolidJobs::Native::Client.new(REDIS.url, @namespace).enable_telemetry(publisher_settings.except(:buffer))
    end
    assert_match(/publisher telemetry settings: missing field `buffer`/, error.message)
    error = assert_raises(ArgumentError) do
      SolidJobs::Native::Client.new(REDIS.url, @namespace).enable_telemetry(publisher_settings.merge(host: "x"))
    end
    assert_match(/publisher telemetry settings: unknown field `host`/, error.message)
  end

  def test_timeouts_cross_as_a_hash_of_positive_seconds
    redis = source_settings.first
    assert_equal SolidJobs.config.timeouts, redis[:timeouts]
    assert_match(/missing field `timeouts`/, dispatcher_error([redis.except(:timeouts)], telemetry_settings))
    assert_match(/source settings 0: unknown field `idle`, expected one of `connect`, `read`, `write`/,
                 dispatcher_error([redis.merge(timeouts: redis[:timeouts].merge(idle: 1.0))], telemetry_settings))
    error = assert_raises(ArgumentError) do
      SolidJobs::Native::Client.new(REDIS.url, @namespace, {connect: 1.0, read: 0.0, write: 1.0})
    end
    assert_match(/read timeout must be above zero/, error.message)
    error = assert_raises(ArgumentError) do
      SolidJobs::Native::EngineClient.new("tcp://127.0.0.1:1", nil, {connect: 1.0, read: 1.0})
    end
    assert_match(/timeouts: missing field `write`/, error.message)
    assert_equal REDIS.url, SolidJobs::Native::Client.new(REDIS.url, @namespace, nil).url, "nil: the defaults"
  end
end
