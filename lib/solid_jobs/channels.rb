# frozen_string_literal: true

module SolidJobs
  # Pausing channels (docs/flow-control.md, "Pausing channels"):
  #
  #   SolidJobs::Channels.pause("mailers", by: "ops")  # => true (false: already paused)
  #   SolidJobs::Channels.paused                       # => {"mailers" => {"paused_ms" => ..., "by" => "ops"}}
  #   SolidJobs::Channels.resume("mailers")            # => true (false: was not paused)
  #
  # A pause holds from the next claim of every node (each claim reads it in
  # the command it already makes: no heartbeat wait). Jobs already in a
  # node's prefetch window still start; enqueue, scheduling and recovery
  # keep writing to the channel, whose jobs stay ready until resume, which
  # wakes idle nodes at once. This is not node pause (SolidJobs::Nodes,
  # `request_control(:pause)`): that stops one node, every channel, at its
  # next heartbeat. Each call goes to the channel's backend (Routing); a
  # backend that cannot pause (SolidEngine) raises Backends::NotSupported.
  module Channels
    module_function

    # Pauses `channel`; `by` names who did (shown by the dashboard and
    # `solid-jobs channel list`). true when it was not paused already.
    def pause(channel, by: nil, routing: SolidJobs.routing)
      backend(channel, routing).pause_channel(channel.to_s, by: by&.to_s)
    end

    # Resumes `channel`. true when it was paused.
    def resume(channel, routing: SolidJobs.routing)
      backend(channel, routing).resume_channel(channel.to_s)
    end

    # {name => {"paused_ms" => Integer (Redis' clock), "by" => String or nil}}
    # for every paused channel of the backends that can pause, by name.
    def paused(routing: SolidJobs.routing)
      routing.backends.values.select { |b| b.supports?(:pause) }
             .map(&:paused_channels).reduce({}, :merge).sort.to_h
    end

    def paused?(channel, routing: SolidJobs.routing) = paused(routing: routing).key?(channel.to_s)

    def backend(channel, routing)
      backend = routing.backend_for(channel)
      return backend if backend.supports?(:pause)

      raise Backends::NotSupported, "channel #{channel.to_s.inspect} is routed to the #{backend.name.inspect} backend " \
                                    "(#{backend.class.name.split("::").last}), which cannot pause a channel"
    end
    private_class_method :backend
  end
end
