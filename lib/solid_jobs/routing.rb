# frozen_string_literal: true

module SolidJobs
  # Which backend serves each channel, built once from the configuration
  # and made shareable, so worker Ractors can enqueue too.
  class Routing
    attr_reader :backends

    # The specs were checked at configure (Configuration#backend_specs, the
    # same rules): a routing entry or spec that is wrong fails there, naming
    # the setting, not here at the first enqueue.
    def self.build(config)
      specs = config.backend_specs
      used = ([config.backend] + config.channel_backends.values).uniq
      backends = used.to_h { |name| [name, Backends.build(name, specs.fetch(name), config)] }
      Ractor.make_shareable(new(backends, config.backend, config.channel_backends))
    end

    def initialize(backends, default, channel_backends)
      @backends = backends.freeze
      @default = default
      @channel_backends = channel_backends.transform_keys(&:to_s).freeze
    end

    def backend_for(channel)
      @backends.fetch(@channel_backends.fetch(channel.to_s, @default))
    end

    # [[backend, [[channel, weight], ...]], ...] for the channels a worker serves.
    def group(channels)
      channels.group_by { |name, _| backend_for(name) }.to_a
    end

    # The Redis backend's client (archive, integrity check, raw commands),
    # when Redis is used.
    def redis
      @backends.values.find { |b| b.is_a?(Backends::Redis) }
    end
  end
end
