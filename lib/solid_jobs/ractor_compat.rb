# frozen_string_literal: true

module SolidJobs
  # The one place that knows which Ractor API the running Ruby has (see
  # docs/ruby-versions.md, "Ruby 4.0 readiness"). Ruby 3.1-3.4 join a Ractor
  # with #take and share a Proc with Ractor.make_shareable; Ruby 4.0 removed
  # #take and Ractor.yield (Ractor::Port, #join and #value replace them) and
  # added Ractor.shareable_proc. Workers never use Ractor messaging for jobs
  # (native channels do that), so joining, spawning and sharing procs is all
  # that differs here.
  #
  # Each branch is chosen by asking the object at hand what it answers
  # (respond_to?), never by RUBY_VERSION, and the Ractor class is a
  # parameter (`api:`, ::Ractor by default): test/ractor_compat_test.rb runs
  # both branches of every method with stand-ins on any Ruby, without
  # patching core classes.
  module RactorCompat
    # Core methods bound to the block, so no method a Proc subclass (or a
    # monkey patch) overrides is called.
    PROC_DUP = Proc.instance_method(:dup)
    PROC_BINDING = Proc.instance_method(:binding)
    PROC_LAMBDA = Proc.instance_method(:lambda?)
    BINDING_RECEIVER = Binding.instance_method(:receiver)

    module_function

    # Waits for `ractor` to end and returns its block's value. Both #take
    # (3.x) and #value (4.0) raise Ractor::RemoteError, its cause the
    # exception, when the block raised. Once per Ractor: a second call raises
    # (Ractor::ClosedError on 3.x, Ractor::Error on 4.0, where only one
    # Ractor may ever receive the value).
    def join(ractor)
      ractor.respond_to?(:value) ? ractor.value : ractor.take
    end

    def spawn(*args, name: nil, api: Ractor, &block)
      api.new(*args, name: name, &block)
    end

    # A shareable copy of `block` with the same self; `block` itself is left
    # as it was on every version (3.x's make_shareable would isolate it in
    # place, so a copy is shared there). Raises what make_shareable raises:
    # Ractor::IsolationError when self or a captured variable's value is
    # not shareable, ArgumentError when the block assigns a captured
    # variable.
    #
    # 4.0's shareable_proc replaces self with its `self:` keyword (nil when
    # omitted), so the block's own self is passed on: a DSL block keeps
    # calling its class's methods. A block without a binding (a Symbol's or
    # a C method's proc) has no self to keep; make_shareable, which 4.0
    # still applies to the procs inside any object graph, shares it as on
    # 3.x.
    def shareable_proc(block, api: Ractor)
      return api.make_shareable(PROC_DUP.bind_call(block)) unless api.respond_to?(:shareable_proc)

      receiver = begin
        BINDING_RECEIVER.bind_call(PROC_BINDING.bind_call(block))
      rescue ArgumentError
        return api.make_shareable(PROC_DUP.bind_call(block))
      end
      if PROC_LAMBDA.bind_call(block)
        api.shareable_lambda(self: receiver, &block)
      else
        api.shareable_proc(self: receiver, &block)
      end
    end

    # The current Ractor's number (1 for the main Ractor). 3.1 to 3.4 have no
    # public Ractor#id; the inspect output ("#<Ractor:#2 ...>") carries the
    # number, and 4.0's Ractor#inspect (ractor.rb) begins the same way.
    def current_id(api: Ractor)
      api.current.inspect[/#(\d+)/, 1].to_i
    end
  end
end
