# frozen_string_literal: true

require "minitest/autorun"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "solid_jobs/ractor_compat"

Warning[:experimental] = false

# SolidJobs::RactorCompat on both sides of the Ruby 4.0 Ractor change, on
# whichever Ruby runs this: stand-ins that answer only the 3.x API (#take,
# make_shareable) or only the 4.0 one (#value, shareable_proc) drive each
# branch, and real Ractors check the branch the running Ruby takes. No
# Redis and no native extension: this file runs on a Ruby whose gems do not
# resolve yet.
class RactorCompatTest < Minitest::Test
  Compat = SolidJobs::RactorCompat

  # A joinable object of one Ruby generation: it answers the given method
  # only, and records that it was asked.
  class FakeRactor
    attr_reader :calls

    def initialize(method, result)
      @calls = []
      define_singleton_method(method) do
        @calls << method
        result
      end
    end
  end

  # A stand-in for the Ractor class. `generation` 3 answers make_shareable
  # only (3.1-3.4); 4 answers shareable_proc and shareable_lambda too
  # (4.0). Each call is recorded with what it received.
  class FakeRactorApi
    attr_reader :calls

    def initialize(generation)
      @calls = []
      return unless generation >= 4

      # A parameter named `self` reads as the receiver, not the argument,
      # hence **keywords.
      define_singleton_method(:shareable_proc) { |**keywords, &block| record(:shareable_proc, block, keywords.fetch(:self)) }
      define_singleton_method(:shareable_lambda) { |**keywords, &block| record(:shareable_lambda, block, keywords.fetch(:self)) }
    end

    def make_shareable(object) = record(:make_shareable, object)
    def new(*args, name: nil, &block) = record(:new, block, args, name)
    def current = Object.new.tap { |o| o.define_singleton_method(:inspect) { "#<Ractor:#7 solid-jobs-worker-3 running>" } }

    private

    def record(*call)
      @calls << call
      :"#{call.first}_result"
    end
  end

  # Blocks whose self is a shareable module, as a task class body's is.
  module Owner
    def self.proc_block = proc { |n| [self, n * 2] }
    def self.lambda_block = ->(n) { [self, n * 2] }
  end

  def test_join_takes_on_ruby3_and_asks_for_the_value_on_ruby4
    old = FakeRactor.new(:take, :from_take)
    assert_equal :from_take, Compat.join(old)
    assert_equal [:take], old.calls

    new = FakeRactor.new(:value, :from_value)
    assert_equal :from_value, Compat.join(new)
    assert_equal [:value], new.calls
  end

  def test_join_on_the_running_ruby_returns_the_block_value
    ractor = Ractor.new([1, 2]) { |a, b| a + b }
    assert_equal 3, Compat.join(ractor)
  end

  def test_join_raises_the_remote_error_with_the_block_exception_as_cause
    ractor = Ractor.new do
      Thread.current.report_on_exception = false # expected: no report on stderr
      raise ArgumentError, "boom in a ractor"
    end
    error = assert_raises(Ractor::RemoteError) { Compat.join(ractor) }
    assert_instance_of ArgumentError, error.cause
    assert_equal "boom in a ractor", error.cause.message
  end

  def test_spawn_passes_arguments_name_and_block_to_the_api
    api = FakeRactorApi.new(3)
    body = proc { |x| x }
    assert_equal :new_result, Compat.spawn(1, :two, name: "w-1", api: api, &body)
    assert_equal [[:new, body, [1, :two], "w-1"]], api.calls
  end

  def test_spawn_on_the_running_ruby_names_the_ractor
    ractor = Compat.spawn(20, 22, name: "compat-spawn") { |a, b| [Ractor.current.name, a + b] }
    assert_equal "compat-spawn", ractor.name
    assert_equal ["compat-spawn", 42], Compat.join(ractor)
  end

  def test_shareable_proc_on_ruby3_shares_a_copy_with_make_shareable
    api = FakeRactorApi.new(3)
    block = Owner.proc_block
    assert_equal :make_shareable_result, Compat.shareable_proc(block, api: api)
    (name, copy), = api.calls
    assert_equal :make_shareable, name
    refute_same block, copy, "the block itself is never handed to make_shareable"
    assert_equal block.call(4), copy.call(4)
  end

  def test_shareable_proc_on_ruby4_keeps_the_block_self
    api = FakeRactorApi.new(4)
    block = Owner.proc_block
    assert_equal :shareable_proc_result, Compat.shareable_proc(block, api: api)
    assert_equal [[:shareable_proc, block, Owner]], api.calls, "self: is the block's own self, not nil"
  end

  def test_shareable_proc_on_ruby4_keeps_a_lambda_a_lambda
    api = FakeRactorApi.new(4)
    block = Owner.lambda_block
    assert_equal :shareable_lambda_result, Compat.shareable_proc(block, api: api)
    assert_equal [[:shareable_lambda, block, Owner]], api.calls
  end

  def test_shareable_proc_on_ruby4_shares_a_block_without_binding_with_make_shareable
    api = FakeRactorApi.new(4)
    block = :upcase.to_proc
    assert_raises(ArgumentError) { block.binding } # why this branch exists
    assert_equal :make_shareable_result, Compat.shareable_proc(block, api: api)
    (name, copy), = api.calls
    assert_equal :make_shareable, name
    assert_equal "AB", copy.call("ab")
  end

  def test_shareable_proc_on_the_running_ruby
    block = Owner.proc_block
    copy = Compat.shareable_proc(block)
    assert Ractor.shareable?(copy)
    refute Ractor.shareable?(block), "the original stays as it was"
    assert_equal [Owner, 10], copy.call(5), "self is kept"
    assert_equal [Owner, 10], Compat.join(Ractor.new(copy) { |shared| shared.call(5) })
    assert_predicate Compat.shareable_proc(Owner.lambda_block), :lambda?
  end

  def test_shareable_proc_on_the_running_ruby_refuses_what_make_shareable_refuses
    captured = +"mutable"
    block = Owner.module_exec { proc { captured } } # a shareable self: only the capture is in the way
    error = assert_raises(Ractor::IsolationError) { Compat.shareable_proc(block) }
    assert_match(/captured|unshareable/, error.message)
    assert_equal "mutable", captured
    refute_predicate captured, :frozen?, "nothing the block captured was frozen"

    unshareable_self = Object.new
    assert_raises(Ractor::IsolationError) { Compat.shareable_proc(unshareable_self.instance_exec { proc { self } }) }
    refute_predicate unshareable_self, :frozen?
  end

  def test_current_id_reads_the_number_from_inspect
    assert_equal 7, Compat.current_id(api: FakeRactorApi.new(4))
  end

  def test_current_id_on_the_running_ruby
    assert_equal 1, Compat.current_id
    assert_operator Compat.join(Ractor.new { SolidJobs::RactorCompat.current_id }), :>=, 2
  end
end
