# frozen_string_literal: true

require "redis"
require_relative "command_meter"

module Bench
  # Everything a CommandMeter needs around one redis-server: the proxy the
  # measured clients connect through, a MONITOR feed, and a control
  # connection (direct, so never counted) for markers, probes and scene
  # setting. Every script of solid_core is loaded up front.
  class MeteredRedis
    attr_reader :proxy, :control, :meter

    # `meter_options`: passed on to CommandMeter (roles:, scripts:, quiet:).
    def initialize(redis_port, **meter_options)
      @redis_port = redis_port
      @meter_options = meter_options
    end

    # Opens everything, yields self, and closes it all again.
    def self.open(redis_port, **meter_options)
      metered = new(redis_port, **meter_options)
      metered.start
      yield metered
    ensure
      metered&.stop
    end

    def direct_url = "redis://127.0.0.1:#{@redis_port}/0"

    def start
      @proxy = RoundTripProxy.new(@redis_port).start
      @monitor = RedisMonitor.new(@redis_port).start
      @control = Redis.new(url: direct_url)
      ScriptNames.preload(@control)
      @meter = CommandMeter.new(proxy: @proxy, monitor: @monitor, control: @control, **@meter_options)
    end

    def stop
      @proxy&.stop
      @monitor&.stop
      @control&.close
    end
  end
end
